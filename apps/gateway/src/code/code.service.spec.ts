import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { CODE_BUNDLE_MAX_BYTES } from '#tern/contracts';
import { CodeBundlesRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { CodeService } from './code.service.js';
import { CodeStore } from './code-store.js';

const bundle = Buffer.from('a tar.gz, as far as this spec cares');
const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;

async function code() {
  const { sut, fake } = await newTestService(CodeService);
  const store = fake(CodeStore);
  store.info.mockResolvedValue(null);
  const bundles = fake(CodeBundlesRepository);
  bundles.isOwnedBy.mockResolvedValue(false);
  return { sut, store, bundles };
}

describe('CodeService.upload', () => {
  it('stores bytes whose sha256 is the digest, and records the workspace as holding them', async () => {
    const { sut, store, bundles } = await code();
    await expect(sut.upload('w1', digest, Readable.from([bundle]), 'application/gzip', String(bundle.length))).resolves.toEqual({
      digest,
      size: bundle.length,
      created: true,
    });
    expect(store.put).toHaveBeenCalledWith(digest.slice(7), bundle);
    expect(bundles.record).toHaveBeenCalledWith('w1', digest);
  });

  it('refuses bytes that do not match the digest with a 400 naming their sha256, storing nothing', async () => {
    const { sut, store, bundles } = await code();
    const other = Buffer.from('something else');
    await expect(sut.upload('w1', digest, Readable.from([other]), 'application/gzip', undefined)).rejects.toMatchObject({
      status: 400,
      response: { message: [`digest does not match the body: the body's sha256 is ${createHash('sha256').update(other).digest('hex')}`] },
    });
    expect(store.put).not.toHaveBeenCalled();
    expect(bundles.record).not.toHaveBeenCalled();
  });

  it('refuses a body that is not a byte stream with a 415, and one declared over the limit with a 413 before reading it', async () => {
    const { sut } = await code();
    await expect(sut.upload('w1', digest, { some: 'json' }, 'application/json', undefined)).rejects.toMatchObject({
      status: 415,
      message: 'send the bundle as application/gzip or application/octet-stream (got application/json)',
    });
    const body = Readable.from([bundle]);
    await expect(sut.upload('w1', digest, body, 'application/gzip', String(CODE_BUNDLE_MAX_BYTES + 1))).rejects.toMatchObject({
      status: 413,
      message: expect.stringMatching(/^code bundles are limited to \d+ MiB \(content-length \d+\)/),
    });
    expect(body.readableDidRead).toBe(false);
  });

  it('stores the bytes once; a workspace that sends them again gets created: false', async () => {
    const { sut, store, bundles } = await code();
    store.info.mockResolvedValue({ size: bundle.length } as never);
    bundles.isOwnedBy.mockResolvedValue(true);
    await expect(sut.upload('w1', digest, Readable.from([bundle]), 'application/gzip', undefined)).resolves.toMatchObject({
      created: false,
    });
    expect(store.put).not.toHaveBeenCalled();
    expect(bundles.record).toHaveBeenCalledWith('w1', digest);
  });
});

describe('CodeService.exists', () => {
  it("counts a bundle as the workspace's only when it uploaded it and the store still has it", async () => {
    const { sut, store, bundles } = await code();
    store.info.mockResolvedValue({ size: 1 } as never);
    expect(await sut.exists('w1', digest)).toBe(false);
    bundles.isOwnedBy.mockResolvedValue(true);
    expect(await sut.exists('w1', digest)).toBe(true);
    store.info.mockResolvedValue(null);
    expect(await sut.exists('w1', digest)).toBe(false);
  });
});
