import { Readable } from 'node:stream';
import { TERN_CONFIG } from '#tern/config';
import { AGENT_VOLUME_COMMIT, VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import { type VolumeFileRow, VolumesRepository, type VolumeSummary } from '#tern/persistence';
import { sha256Hex } from '#tern/volumes';
import { newTestService } from '../../../../test/support/test-service.js';
import { VolumeChunkStore } from './volume-chunk-store.js';
import { VolumesService } from './volumes.service.js';

const QUOTA = { quotaBytes: 3 * VOLUME_CHUNK_BYTES, quotaFiles: 10 };
const weights = { id: 'v1', name: 'weights', version: 2 } as VolumeSummary;

async function volumes(used = { bytes: 0, files: 0 }) {
  const { sut, fake } = await newTestService(VolumesService, [[TERN_CONFIG, { volumes: QUOTA }]]);
  const repo = fake(VolumesRepository);
  repo.find.mockImplementation(async (workspaceId, name) => (workspaceId === 'w1' && name === 'weights' ? weights : undefined));
  repo.usage.mockResolvedValue(used);
  repo.files.mockResolvedValue([]);
  repo.touchChunk.mockResolvedValue(false);
  repo.forgetUnheldChunks.mockResolvedValue([]);
  repo.commit.mockResolvedValue({ version: 3 } as never);
  const chunks = fake(VolumeChunkStore);
  // The object-store layout: no registry manifests to publish.
  Object.defineProperty(chunks, 'inRegistry', { value: false });
  return { sut, repo, chunks, messaging: fake(Messaging) };
}

const body = (...parts: Buffer[]) => Readable.from(parts);
const octets = { contentType: 'application/octet-stream' };

describe('VolumesService.create', () => {
  it('refuses a name that breaks the rule with a 400 saying the rule, and a taken one with a 409', async () => {
    const { sut, repo } = await volumes();
    await expect(sut.create('w1', 'Not_A_Name')).rejects.toMatchObject({ status: 400 });
    expect(repo.create).not.toHaveBeenCalled();
    repo.create.mockResolvedValue(undefined);
    await expect(sut.create('w1', 'weights')).rejects.toMatchObject({
      status: 409,
      message: 'volume weights exists already in this workspace',
    });
  });
});

describe('VolumesService.put', () => {
  it('stores only the chunks the workspace lacks and commits the file as the next version', async () => {
    const { sut, repo, chunks } = await volumes();
    const known = Buffer.alloc(VOLUME_CHUNK_BYTES, 1);
    const fresh = Buffer.from('the tail');
    repo.touchChunk.mockImplementation(async (_w, hex) => hex === sha256Hex(known));
    const answer = await sut.put('w1', 'weights', 'model/a.bin', body(known, fresh), octets);
    expect(answer).toEqual({ path: 'model/a.bin', size: known.length + fresh.length, chunks: 2, version: 3 });
    expect(chunks.put.mock.calls.map(([, , hex]) => hex)).toEqual([sha256Hex(fresh)]);
    expect(repo.recordChunk).toHaveBeenCalledWith('w1', sha256Hex(fresh), fresh.length);
    expect(repo.recordChunk).toHaveBeenCalledTimes(1);
    expect(repo.commit).toHaveBeenCalledWith(
      'v1',
      undefined,
      [
        expect.objectContaining({
          path: 'model/a.bin',
          size: known.length + fresh.length,
          mode: 0o644,
          chunks: [sha256Hex(known), sha256Hex(fresh)],
        }),
      ],
      [],
    );
  });

  it('refuses with 413 an upload whose declared length is over the quota, before storing a byte', async () => {
    const { sut, repo, chunks } = await volumes({ bytes: 2 * VOLUME_CHUNK_BYTES, files: 1 });
    await expect(
      sut.put('w1', 'weights', 'big.bin', body(Buffer.from('x')), { ...octets, contentLength: String(2 * VOLUME_CHUNK_BYTES) }),
    ).rejects.toMatchObject({ status: 413, message: expect.stringMatching(/over its quota of \d+ \(VOLUME_QUOTA_BYTES\)/) });
    expect(chunks.put).not.toHaveBeenCalled();
    expect(repo.commit).not.toHaveBeenCalled();
  });

  it('sweeps at once what an upload stored before it ran over the quota, and commits nothing', async () => {
    const { sut, repo, chunks } = await volumes({ bytes: 2 * VOLUME_CHUNK_BYTES, files: 0 });
    const first = Buffer.alloc(VOLUME_CHUNK_BYTES, 2);
    const second = Buffer.alloc(VOLUME_CHUNK_BYTES, 3);
    await expect(sut.put('w1', 'weights', 'big.bin', body(first, second), octets)).rejects.toMatchObject({ status: 413 });
    expect(chunks.put).toHaveBeenCalledTimes(1);
    await new Promise((r) => setImmediate(r));
    expect(repo.forgetUnheldChunks).toHaveBeenCalledWith('w1', 0, [sha256Hex(first)]);
    expect(repo.commit).not.toHaveBeenCalled();
  });

  it('refuses a new file past the quota of files with a 413', async () => {
    const { sut } = await volumes({ bytes: 0, files: QUOTA.quotaFiles });
    await expect(sut.put('w1', 'weights', 'one-more.txt', body(Buffer.from('x')), octets)).rejects.toMatchObject({
      status: 413,
      message: expect.stringMatching(/VOLUME_QUOTA_FILES/),
    });
  });

  it('refuses to write a file over a directory with a 409 saying what to do', async () => {
    const { sut, repo } = await volumes();
    repo.files.mockResolvedValue([{ path: 'model/a.bin' } as VolumeFileRow]);
    await expect(sut.put('w1', 'weights', 'model', body(Buffer.from('x')), octets)).rejects.toMatchObject({
      status: 409,
      message: 'model is a directory of volume weights: rm it first or choose another path',
    });
  });

  it("answers 404 for another workspace's volume of the same name", async () => {
    const { sut, repo } = await volumes();
    await expect(sut.put('w2', 'weights', 'a.txt', body(Buffer.from('x')), octets)).rejects.toMatchObject({ status: 404 });
    expect(repo.commit).not.toHaveBeenCalled();
  });
});

describe('VolumesService.commit (from a machine)', () => {
  it("sizes the files from the workspace's stored chunks, not the machine's word", async () => {
    const { sut, repo } = await volumes();
    repo.chunkSizes.mockResolvedValue(
      new Map([
        ['aa', 10],
        ['bb', 5],
      ]),
    );
    await sut.commit('v1', 'w1', 2, [{ path: 'out.txt', mode: 0o600, mtime: '2026-01-01T00:00:00Z', chunks: ['aa', 'bb'] }], []);
    expect(repo.commit).toHaveBeenCalledWith('v1', 2, [expect.objectContaining({ path: 'out.txt', size: 15 })], []);
  });

  it('refuses a commit naming a chunk the workspace does not store, with a 400 naming it', async () => {
    const { sut, repo } = await volumes();
    repo.chunkSizes.mockResolvedValue(new Map([['aa', 10]]));
    await expect(
      sut.commit('v1', 'w1', 2, [{ path: 'out.txt', mode: 0o600, mtime: '2026-01-01T00:00:00Z', chunks: ['aa', 'cc'] }], []),
    ).rejects.toMatchObject({ status: 400, response: { message: ['chunk cc of out.txt is not stored: upload it before the commit'] } });
    expect(repo.commit).not.toHaveBeenCalled();
  });
});

describe('VolumesService.commitMounts', () => {
  it('reports a machine that did not answer as a failed commit, without naming the machine', async () => {
    const { sut, repo, messaging } = await volumes();
    repo.writers.mockResolvedValue([
      { containerId: 'c1', machineId: 'm-secret-1' },
      { containerId: 'c2', machineId: 'm-secret-2' },
    ] as never);
    messaging.request
      .mockResolvedValueOnce({ outcome: 'committed', version: 3, overwritten: [], skipped: [] } as never)
      .mockRejectedValueOnce(new RequestError(503, 'no responders', AGENT_VOLUME_COMMIT.subject));
    const answer = await sut.commitMounts('w1', 'weights');
    expect(messaging.request).toHaveBeenCalledWith(
      AGENT_VOLUME_COMMIT,
      { containerId: 'c1', volume: 'weights' },
      expect.objectContaining({ tokens: ['m-secret-1'] }),
    );
    expect(answer.containers[1]).toEqual({
      containerId: 'c2',
      outcome: 'failed',
      overwritten: [],
      skipped: [],
      reason: "the container's machine did not answer: no responders",
    });
    expect(JSON.stringify(answer)).not.toMatch(/m-secret/);
  });
});
