import { open, readdir, rm, stat } from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImageError, buildBaseImage, buildImage, skopeoCopy } from '#tern/runtime';
import { describeNeeding } from '../support/real-parts.js';
import { collectLogs, containerId, RuntimeSandbox } from '../runtime/support.js';
import { pushTestBase, TEST_BASE_PACKAGES, TEST_IMAGE_CACHE, TestRegistry } from './support.js';

const describeImages = await describeNeeding(['root', 'runc', 'umoci', 'skopeo', 'docker-registry', 'debootstrap']);

/** The biggest blob under the registry's storage: the base's one layer. */
async function largestBlob(storage: string): Promise<string> {
  const root = join(storage, 'docker/registry/v2/blobs/sha256');
  let best = { path: '', size: -1 };
  for (const prefix of await readdir(root))
    for (const hex of await readdir(join(root, prefix))) {
      const path = join(root, prefix, hex, 'data');
      const { size } = await stat(path);
      if (size > best.size) best = { path, size };
    }
  return best.path;
}

describeImages('images in an OCI registry', () => {
  let work: string;
  let registry: TestRegistry;
  let base: { ref: string; digest: string };

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tern-images-'));
    registry = await TestRegistry.start(join(work, 'registry'));
    base = await pushTestBase(registry);
  }, 900_000);

  afterAll(async () => {
    await registry?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('pushes the debootstrapped base and an agent with an empty cache pulls it by digest, once', async () => {
    expect(base.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const progress: string[] = [];
    const sandbox = await RuntimeSandbox.create({}, { registries: [registry.puller], onPullProgress: (_ref, line) => progress.push(line) });
    try {
      const ref = `${registry.host}/tern/base@${base.digest}`;
      const image = await sandbox.images.resolve(ref);
      expect(image.digest).toBe(base.digest);
      expect(progress.some((l) => /Copying blob sha256:/.test(l))).toBe(true);

      const id = containerId('base');
      await sandbox.runtime.start({ id, image: ref, args: ['/bin/sh', '-c', 'cat /etc/tern-base /etc/debian_version'] });
      const out = (await collectLogs(sandbox.runtime, id)).map((l) => l.line);
      expect(out[0]).toBe('debian bookworm minbase python3');
      expect(out[1]).toMatch(/^12\./);
      expect(await sandbox.runtime.wait(id)).toMatchObject({ exitCode: 0 });
      await sandbox.runtime.remove(id);

      progress.length = 0;
      const again = await sandbox.images.resolve(ref);
      expect(again.rootfs).toBe(image.rootfs);
      expect(progress).toEqual([]);
    } finally {
      await sandbox.destroy();
    }
  }, 300_000);

  let again: string;

  it('a second push of the same base reuses the cached root filesystem and its packed layer', async () => {
    const lines: string[] = [];
    const pushed = await buildBaseImage(`${registry.host}/tern/base:again`, [registry.builder], {
      cacheDir: TEST_IMAGE_CACHE,
      include: TEST_BASE_PACKAGES,
      onProgress: (l) => lines.push(l),
    });
    expect(lines.some((l) => l.startsWith('debootstrap bookworm: cached'))).toBe(true);
    expect(lines).not.toContain('packing the root filesystem into one layer');
    expect(pushed).toBe(base.digest);
    // A second manifest on the same layer (a config-only build), for the cache test below.
    again = (
      await buildImage(
        { env: { AGAIN: '1' } },
        {
          base: base.ref,
          target: `${registry.host}/tern/base:again`,
          access: [registry.builder],
          layout: join(work, 'layout'),
          workDir: join(work, 'scratch'),
        },
      )
    ).digest;
  }, 300_000);

  it('keeps the unpacked images under the size limit, least recently used out first, never one in use', async () => {
    expect(again).not.toBe(base.digest); // a second manifest (its own config), the same layer
    const refA = `${registry.host}/tern/base@${base.digest}`;
    const refB = `${registry.host}/tern/base@${again}`;
    const inUse: string[] = [];
    const evicted: string[] = [];
    const sandbox = await RuntimeSandbox.create(
      {},
      { registries: [registry.puller], maxBytes: 1, inUse: async () => inUse, onEvict: (d) => evicted.push(d) },
    );
    try {
      const a = await sandbox.images.resolve(refA);
      inUse.push(base.digest);
      const b = await sandbox.images.resolve(refB);
      expect(evicted).toEqual([]); // A is in use, B was just pulled
      inUse.length = 0;
      await sandbox.images.resolve(refB); // B used again: A is the least recently used
      expect(evicted).toEqual([base.digest]);
      await expect(stat(a.rootfs)).rejects.toThrow(/ENOENT/);
      expect((await stat(b.rootfs)).isDirectory()).toBe(true);
      // Layers stream into tar: no copy of the compressed blobs is kept to evict.
      await expect(stat(join(sandbox.dir, 'images', 'layout'))).rejects.toThrow(/ENOENT/);
      // Pulled again on demand.
      expect((await sandbox.images.resolve(refA)).digest).toBe(base.digest);
    } finally {
      await sandbox.destroy();
    }
  }, 300_000);

  it('refuses wrong credentials, a pull without any, an unreachable registry and a tag-only reference, naming the image', async () => {
    const sandbox = await RuntimeSandbox.create({}, { registries: [{ ...registry.puller, password: 'wrong' }] });
    try {
      const ref = `${registry.host}/tern/base@${base.digest}`;
      await expect(sandbox.images.resolve(ref)).rejects.toThrow(
        new RegExp(`image ${ref.replace(/[.]/g, '\\.')}: .*(unauthorized|authentication required)`, 's'),
      );
      const anonymous = await RuntimeSandbox.create({}, { registries: [{ host: registry.host, insecure: true }] });
      await expect(anonymous.images.resolve(ref)).rejects.toThrow(/unauthorized|authentication required/);
      await anonymous.destroy();
      await expect(sandbox.images.resolve(`127.0.0.1:1/tern/base@${base.digest}`)).rejects.toThrow(
        /image 127\.0\.0\.1:1\/tern\/base@sha256:.*(connection refused|dial tcp)/s,
      );
      await expect(sandbox.images.resolve(`${registry.host}/tern/base:test`)).rejects.toThrow(/pulls images by digest only/);
      await expect(sandbox.images.resolve('Tern/Base:1')).rejects.toThrow(ImageError);
    } finally {
      await sandbox.destroy();
    }
  }, 120_000);

  it('refuses a tampered blob and keeps no half-pulled image', async () => {
    const blob = await largestBlob(join(registry.dir, 'storage'));
    const fh = await open(blob, 'r+');
    try {
      const { size } = await fh.stat();
      const at = Math.floor(size / 2);
      const b = Buffer.alloc(1);
      await fh.read(b, 0, 1, at);
      b[0] = b[0]! ^ 0xff;
      await fh.write(b, 0, 1, at);
    } finally {
      await fh.close();
    }
    const sandbox = await RuntimeSandbox.create({}, { registries: [registry.puller] });
    try {
      const ref = `${registry.host}/tern/base@${base.digest}`;
      await expect(sandbox.images.resolve(ref)).rejects.toThrow(/digest/i);
      expect(await readdir(join(sandbox.dir, 'images', 'oci')).catch(() => [])).toEqual([]);
      // Nothing that a later resolve could take for the image either.
      await expect(skopeoCopy(ref, `docker://${ref}`, `oci:${join(sandbox.dir, 'probe')}:x`, [registry.puller])).rejects.toThrow(
        ImageError,
      );
    } finally {
      await sandbox.destroy();
    }
  }, 300_000);
});
