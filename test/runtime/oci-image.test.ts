import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { execa } from 'execa';
import { ImageError } from '#tern/runtime';
import { describeNeeding } from '../support/real-parts.js';
import { collectLogs, containerId, RuntimeSandbox } from './support.js';

const describeOci = await describeNeeding(['root', 'runc', 'umoci']);

/** A tiny OCI layout built with umoci: the host's dash and libc, a file, env, cmd, a named user. */
async function buildLayout(dir: string): Promise<string> {
  const stage = join(dir, 'stage');
  const layout = join(dir, 'layout');
  for (const d of ['bin', 'etc']) await mkdir(join(stage, d), { recursive: true });
  await cp('/bin/dash', join(stage, 'bin/sh'), { dereference: true });
  const { stdout } = await execa('ldd', ['/bin/dash']);
  for (const [, lib] of stdout.matchAll(/(\/\S+\.so[.\d]*)/g)) {
    const target = join(stage, lib!.replace(/^\/usr/, ''));
    await mkdir(dirname(target), { recursive: true });
    await cp(lib!, target, { dereference: true });
  }
  await writeFile(join(stage, 'etc/passwd'), 'root:x:0:0::/:/bin/sh\napp:x:1000:1001::/:/bin/sh\n');
  await writeFile(join(stage, 'etc/group'), 'root:x:0:\napp:x:1001:\n');
  await writeFile(join(stage, 'etc/msg'), 'inside the image\n');
  const image = `${layout}:v1`;
  await execa('umoci', ['init', '--layout', layout]);
  await execa('umoci', ['new', '--image', image]);
  for (const d of await readdir(stage)) await execa('umoci', ['insert', '--image', image, join(stage, d), `/${d}`]);
  await execa('umoci', [
    'config',
    '--image',
    image,
    '--config.env',
    'GREETING=hi',
    '--config.user',
    'app',
    '--config.workingdir',
    '/etc',
    '--config.cmd',
    '/bin/sh',
    '--config.cmd',
    '-c',
    '--config.cmd',
    'read m < msg; echo "$GREETING $m $(pwd)"; exit 5',
  ]);
  return layout;
}

describeOci('ImageStore with oci: layouts', () => {
  let sandbox: RuntimeSandbox;
  let work: string;
  let layout: string;

  beforeAll(async () => {
    sandbox = await RuntimeSandbox.create();
    work = await mkdtemp(join(tmpdir(), 'tern-oci-'));
    layout = await buildLayout(work);
  });

  afterAll(async () => {
    await sandbox?.destroy();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('unpacks once per manifest digest and runs the image config (cmd, env, cwd, user)', async () => {
    const ref = `oci:${layout}:v1`;
    const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
    const image = await sandbox.images.resolve(ref);
    expect(image.digest).toBe(index.manifests[0]!.digest);
    expect(image.user).toEqual({ uid: 1000, gid: 1001 });
    expect(image.rootfs).toBe(join(sandbox.dir, 'images', 'oci', image.digest.replace(':', '-'), 'rootfs'));
    const unpackedAt = (await stat(image.rootfs)).mtimeMs;

    const id = containerId('oci');
    await sandbox.runtime.start({ id, image: ref });
    expect((await collectLogs(sandbox.runtime, id)).map((l) => `${l.stream}:${l.line}`)).toEqual(['stdout:hi inside the image /etc']);
    expect(await sandbox.runtime.wait(id)).toMatchObject({ exitCode: 5 });
    await sandbox.runtime.remove(id);

    const again = await sandbox.images.resolve(ref);
    expect(again.rootfs).toBe(image.rootfs);
    expect((await stat(again.rootfs)).mtimeMs).toBe(unpackedAt);
  });

  it('rejects a tag the layout does not have', async () => {
    await expect(sandbox.images.resolve(`oci:${layout}:nope`)).rejects.toThrow(ImageError);
  });
});
