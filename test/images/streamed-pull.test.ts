import { randomBytes } from 'node:crypto';
import {
  chmod,
  chown,
  link,
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { execa } from 'execa';
import { freePort, ImageStore, type RegistryAccess } from '#tern/runtime';
import { describeNeeding } from '../support/real-parts.js';
import { pushOciImage, type PushedLayer } from './oci-push.js';
import { TestRegistry } from './support.js';

const describeStreamed = await describeNeeding(['root', 'docker-registry', 'zstd', 'umoci']);

const GZIP = 'application/vnd.oci.image.layer.v1.tar+gzip';
const ZSTD = 'application/vnd.oci.image.layer.v1.tar+zstd';

/** Files for a layer: path → text, or a symlink's target (`-> target`); directories are made on the way. */
async function stage(dir: string, files: Record<string, string>): Promise<void> {
  for (const [path, what] of Object.entries(files)) {
    const p = join(dir, path);
    await mkdir(dirname(p), { recursive: true });
    if (what.startsWith('-> ')) await symlink(what.slice(3), p);
    else if (path.endsWith('/')) await mkdir(p, { recursive: true });
    else await writeFile(p, what);
  }
}

/** The directory as a layer: a pax tar by GNU tar (`drop`: members deleted from it), compressed as `mediaType` says. */
async function layerOf(dir: string, mediaType: string, drop: string[] = []): Promise<PushedLayer> {
  const tar = `${dir}.tar`;
  await execa('tar', ['--format=pax', '--numeric-owner', '--sort=name', '-C', dir, '-cf', tar, '.']);
  if (drop.length) await execa('tar', ['--delete', '-f', tar, ...drop]);
  const compress = mediaType === ZSTD ? ['zstd', ['-q', '-c', tar]] : ['gzip', ['-n', '-c', tar]];
  const r = await execa(compress[0] as string, compress[1] as string[], { encoding: 'buffer' });
  return { mediaType, bytes: Buffer.from(r.stdout) };
}

/** Every path under `root` whose name is a whiteout. */
async function whiteoutsUnder(root: string): Promise<string[]> {
  const found: string[] = [];
  for (const e of await readdir(root, { withFileTypes: true, recursive: true }))
    if (e.name.startsWith('.wh.')) found.push(join(e.parentPath, e.name));
  return found;
}

/** A front door to the registry that dies (every connection cut, the port closed) once `after` bytes have gone out. */
function dyingProxy(port: number, target: string, after: number): Promise<Server> {
  const [host, targetPort] = target.split(':') as [string, string];
  let sent = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(targetPort), host);
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.on('data', (piece: Buffer) => {
      sent += piece.length;
      if (sent > after) {
        server.close();
        for (const s of sockets) s.destroy();
      } else client.write(piece);
    });
    for (const s of [client, upstream]) s.on('error', () => undefined);
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

describeStreamed('registry images streamed into tar as they download', () => {
  let work: string;
  let registry: TestRegistry;
  let builder: RegistryAccess;
  let puller: RegistryAccess;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tern-streamed-'));
    registry = await TestRegistry.start(join(work, 'registry'));
    builder = registry.builder;
    puller = registry.puller;
  }, 60_000);

  afterAll(async () => {
    await registry?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('lays gzip and zstd layers over each other: whiteouts, opaque dirs, a link to a lower file, symlinks, modes, owners', async () => {
    const lower = join(work, 'lower');
    await stage(lower, {
      'etc/keep': 'keep',
      'etc/gone': 'gone',
      'opq/low1': 'low',
      'opq/sub/low2': 'low',
      'data/a': 'shared',
      'bin/tool': '#!/bin/sh\n',
      sym: '-> data/a',
      abs: '-> /etc/keep',
      'd/': '',
      'gonedir/x': 'x',
    });
    await chown(join(lower, 'data/a'), 1234, 5678);
    await chmod(join(lower, 'data/a'), 0o640);
    await chmod(join(lower, 'bin/tool'), 0o4755);
    await chown(join(lower, 'd'), 42, 43);
    await chmod(join(lower, 'd'), 0o700);
    const upper = join(work, 'upper');
    await stage(upper, {
      'etc/.wh.gone': '',
      '.wh.gonedir': '',
      'opq/.wh..wh..opq': '',
      'opq/new': 'new',
      'data/a': 'shared',
      'data/sym2': '-> a',
      'fresh/.wh.nothing': '',
      'fresh/file': 'fresh',
      'd/inner': 'inner',
    });
    await link(join(upper, 'data/a'), join(upper, 'data/b'));
    await chmod(join(upper, 'd'), 0o751);
    const layers = [await layerOf(lower, GZIP), await layerOf(upper, ZSTD, ['./data/a'])];
    const { digest } = await pushOciImage(builder, 'tern/streamed', layers, { Cmd: ['/bin/tool'], Env: ['A=1'], WorkingDir: '/data' });

    const progress: string[] = [];
    const store = new ImageStore({ root: join(work, 'store'), registries: [puller], onPullProgress: (_r, l) => progress.push(l) });
    const image = await store.resolve(`${registry.host}/tern/streamed@${digest}`);
    const root = image.rootfs;
    expect(image).toMatchObject({ digest, cmd: ['/bin/tool'], env: ['A=1'], cwd: '/data' });
    expect(progress.filter((l) => /^Copying blob sha256:[0-9a-f]{64} done/.test(l))).toHaveLength(2);

    expect(await readFile(join(root, 'etc/keep'), 'utf8')).toBe('keep');
    await expect(lstat(join(root, 'etc/gone'))).rejects.toThrow(/ENOENT/);
    await expect(lstat(join(root, 'gonedir'))).rejects.toThrow(/ENOENT/);
    expect((await readdir(join(root, 'opq'))).sort()).toEqual(['new']);
    expect(await readFile(join(root, 'fresh/file'), 'utf8')).toBe('fresh');
    expect(await whiteoutsUnder(root)).toEqual([]);

    const a = await stat(join(root, 'data/a'));
    const b = await stat(join(root, 'data/b'));
    expect(b.ino).toBe(a.ino);
    expect(await readFile(join(root, 'data/b'), 'utf8')).toBe('shared');
    expect({ uid: a.uid, gid: a.gid, mode: a.mode & 0o7777 }).toEqual({ uid: 1234, gid: 5678, mode: 0o640 });
    expect((await stat(join(root, 'bin/tool'))).mode & 0o7777).toBe(0o4755);
    const d = await stat(join(root, 'd'));
    expect({ uid: d.uid, mode: d.mode & 0o7777 }).toEqual({ uid: 0, mode: 0o751 });
    expect(await readFile(join(root, 'd/inner'), 'utf8')).toBe('inner');
    expect(await readlink(join(root, 'sym'))).toBe('data/a');
    expect(await readlink(join(root, 'abs'))).toBe('/etc/keep');
    expect(await readlink(join(root, 'data/sym2'))).toBe('a');

    // Cached: the same rootfs, without asking the registry (stopped meanwhile it would fail).
    progress.length = 0;
    const again = await new ImageStore({ root: join(work, 'store'), registries: [] }).resolve(`${registry.host}/tern/streamed@${digest}`);
    expect(again.rootfs).toBe(root);
    expect(progress).toEqual([]);
  }, 120_000);

  it('unpacks a layer as umoci writes it (sandbox snapshots): its last file whole, though the tar lacks its end blocks', async () => {
    // umoci 0.4's `insert` ends a layer right after the last file's bytes, without padding or the
    // two end blocks: GNU tar alone calls that "Unexpected EOF" and leaves the file empty.
    const layout = join(work, 'umoci-layout');
    await execa('umoci', ['init', '--layout', layout]);
    await execa('umoci', ['new', '--image', `${layout}:base`]);
    const source = join(work, 'umoci-source');
    await stage(source, { 'notes.txt': 'hello', 'big.bin': randomBytes(100_000).toString('base64') });
    await execa('umoci', ['insert', '--image', `${layout}:base`, '--tag', 'snap', '--opaque', source, '/workspace']);
    const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
    const blob = async (digest: string) => readFile(join(layout, 'blobs', 'sha256', digest.slice('sha256:'.length)));
    const manifest = JSON.parse((await blob(index.manifests.at(-1)!.digest)).toString()) as {
      layers: { digest: string; mediaType: string }[];
    };
    const made = manifest.layers.at(-1)!;
    expect(made.mediaType).toBe(GZIP);
    const { digest } = await pushOciImage(builder, 'tern/umoci', [{ mediaType: GZIP, bytes: await blob(made.digest) }]);
    const image = await new ImageStore({ root: join(work, 'umoci-store'), registries: [puller] }).resolve(
      `${registry.host}/tern/umoci@${digest}`,
    );
    for (const name of ['notes.txt', 'big.bin'])
      expect(await readFile(join(image.rootfs, 'workspace', name), 'utf8')).toBe(await readFile(join(source, name), 'utf8'));
  }, 60_000);

  it('refuses a hard link that reaches out of the image through a lower symlink', async () => {
    const lower = join(work, 'esc-lower');
    await stage(lower, { out: '-> /etc' });
    const upper = join(work, 'esc-upper');
    await stage(upper, { 'out/hostname': 'x' });
    await link(join(upper, 'out/hostname'), join(upper, 'stolen'));
    const layers = [await layerOf(lower, GZIP), await layerOf(upper, GZIP, ['./out/hostname', './out'])];
    const { digest } = await pushOciImage(builder, 'tern/escape', layers);
    const root = join(work, 'esc-store');
    const ref = `${registry.host}/tern/escape@${digest}`;
    await expect(new ImageStore({ root, registries: [puller] }).resolve(ref)).rejects.toThrow(
      /links "\.\/out\/hostname" through "out", which is not a directory/,
    );
    expect(await readdir(join(root, 'oci'))).toEqual([]);
  }, 60_000);

  it('refuses a corrupted blob and keeps nothing of the pull', async () => {
    const dir = join(work, 'corrupt');
    await stage(dir, { blob: randomBytes(256 << 10).toString('base64') });
    const { digest, layers } = await pushOciImage(builder, 'tern/corrupt', [await layerOf(dir, GZIP)]);
    const hex = layers[0]!.slice('sha256:'.length);
    const fh = await open(join(registry.dir, 'storage/docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data'), 'r+');
    await fh.write(Buffer.from('garbage'), 0, 7, 4000);
    await fh.close();
    const root = join(work, 'corrupt-store');
    const ref = `${registry.host}/tern/corrupt@${digest}`;
    await expect(new ImageStore({ root, registries: [puller] }).resolve(ref)).rejects.toThrow(
      new RegExp(`image ${ref.replace(/[.]/g, '\\.')}: layer ${layers[0]} from the registry .* has digest sha256:[0-9a-f]{64}: refused`),
    );
    expect(await readdir(join(root, 'oci'))).toEqual([]);
  }, 60_000);

  it('refuses a gzip layer whose stream is broken though its digest holds, naming the decompressor, and keeps nothing', async () => {
    // Several MiB, so that the inflater fails with pieces of the layer still on their way to it.
    const dir = join(work, 'broken-gzip');
    await stage(dir, { blob: '' });
    await writeFile(join(dir, 'blob'), randomBytes(8 << 20));
    const layer = await layerOf(dir, GZIP);
    layer.bytes[10] = 0xff; // the first deflate block's header: a block type that does not exist
    const { digest, layers } = await pushOciImage(builder, 'tern/broken-gzip', [layer]);
    const root = join(work, 'broken-gzip-store');
    const ref = `${registry.host}/tern/broken-gzip@${digest}`;
    await expect(new ImageStore({ root, registries: [puller] }).resolve(ref)).rejects.toThrow(
      new RegExp(`image ${ref.replace(/[.]/g, '\\.')}: decompressing layer ${layers[0]} failed: gzip: invalid block type`),
    );
    expect(await readdir(join(root, 'oci'))).toEqual([]);
  }, 60_000);

  it('fails a pull whose registry dies midway with an error naming it, keeps nothing, and pulls it whole next time', async () => {
    const dir = join(work, 'big');
    await stage(dir, { one: '', two: '' });
    await writeFile(join(dir, 'one'), randomBytes(6 << 20));
    await writeFile(join(dir, 'two'), randomBytes(6 << 20));
    const { digest } = await pushOciImage(builder, 'tern/big', [await layerOf(dir, GZIP)]);
    const port = await freePort();
    const proxy = await dyingProxy(port, registry.host, 3 << 20);
    const root = join(work, 'big-store');
    try {
      const ref = `127.0.0.1:${port}/tern/big@${digest}`;
      const store = new ImageStore({ root, registries: [{ ...puller, host: `127.0.0.1:${port}` }] });
      await expect(store.resolve(ref)).rejects.toThrow(
        new RegExp(`the registry 127\\.0\\.0\\.1:${port} stopped sending layer sha256:[0-9a-f]{64}: cut off after \\d+ of \\d+ bytes`),
      );
      expect(await readdir(join(root, 'oci'))).toEqual([]);
    } finally {
      proxy.close();
    }
    // The same store, straight from the registry: the whole image, nothing of the failed pull in the way.
    const image = await new ImageStore({ root, registries: [puller] }).resolve(`${registry.host}/tern/big@${digest}`);
    expect((await readFile(join(image.rootfs, 'one'))).equals(await readFile(join(dir, 'one')))).toBe(true);
    expect((await readFile(join(image.rootfs, 'two'))).equals(await readFile(join(dir, 'two')))).toBe(true);
    expect(await readdir(join(root, 'oci'))).toEqual([`sha256-${digest.slice('sha256:'.length)}`]);
  }, 60_000);
});
