import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import type { ImageBuild } from '#tern/contracts';
import { buildImage, ImageError } from '#tern/runtime';
import { collectLogs, containerId, RuntimeSandbox } from '../runtime/support.js';
import { describeNeeding } from '../support/real-parts.js';
import { pushTestBase, TestRegistry, writeWheel } from './support.js';

const describeBuild = await describeNeeding(['root', 'runc', 'umoci', 'skopeo', 'docker-registry', 'debootstrap']);

describeBuild('building images from a spec, a layer per step', () => {
  let work: string;
  let registry: TestRegistry;
  let base: string;
  const layout = () => join(work, 'layout');

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tern-build-'));
    registry = await TestRegistry.start(join(work, 'registry'));
    base = (await pushTestBase(registry)).ref;
    await writeWheel(join(work, 'context'));
  }, 900_000);

  afterAll(async () => {
    await registry?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  const build = (spec: ImageBuild, tag: string, log: string[] = []) =>
    buildImage(spec, {
      base,
      target: `${registry.host}/team/app:${tag}`,
      access: [registry.builder],
      layout: layout(),
      workDir: join(work, 'scratch'),
      context: join(work, 'context'),
      onLog: (l) => log.push(l),
    });

  const spec: ImageBuild = {
    apt: ['hello', 'python3-pip'],
    pip: ['ternwheel==1.0'],
    pip_wheels: 'wheels',
    commands: ['echo built > /opt/marker'],
    env: { GREETING: 'hi' },
    workdir: '/opt',
  };

  it('builds each step as a layer, runs the result, then resolves an unchanged spec without running anything', async () => {
    const log: string[] = [];
    const first = await build(spec, 'v1', log);
    expect(first.steps.map((s) => [s.name, s.cached])).toEqual([
      ['apt', false],
      ['pip', false],
      ['commands[0]', false],
    ]);
    expect(log.filter((l) => /^\[\d\/3\] /.test(l))).toEqual([
      '[1/3] apt: hello python3-pip',
      '[2/3] pip: ternwheel==1.0',
      '[3/3] commands[0]: echo built > /opt/marker',
    ]);

    const sandbox = await RuntimeSandbox.create({}, { registries: [registry.puller] });
    try {
      const id = containerId('built');
      const ref = `${registry.host}/team/app@${first.digest}`;
      await sandbox.runtime.start({
        id,
        image: ref,
        args: [
          '/bin/sh',
          '-c',
          // The last: what apt downloaded and cached for itself is not in the image.
          'hello; cat marker; echo "$GREETING $(pwd)"; python3 -c "import ternwheel; print(ternwheel.ANSWER)"; ls /var/cache/apt/*.bin /var/cache/apt/archives/*.deb 2>/dev/null | wc -l',
        ],
      });
      expect((await collectLogs(sandbox.runtime, id)).map((l) => l.line)).toEqual(['Hello, world!', 'built', 'hi /opt', '42', '0']);
      expect(await sandbox.runtime.wait(id)).toMatchObject({ exitCode: 0 });
    } finally {
      await sandbox.destroy();
    }

    const again = await build(spec, 'v1');
    expect(again.digest).toBe(first.digest);
    expect(again.steps.every((s) => s.cached)).toBe(true);
    built = first.digest;
  }, 900_000);

  let built: string;

  /** The manifest the registry holds for a digest of team/app. */
  const pushed = async (digest: string) => {
    const raw = await execa('skopeo', [
      'inspect',
      '--raw',
      '--tls-verify=false',
      '--creds',
      `${registry.puller.username}:${registry.puller.password}`,
      `docker://${registry.host}/team/app@${digest}`,
    ]);
    return JSON.parse(raw.stdout) as { layers: { mediaType: string; size: number; digest: string }[] };
  };
  /** When the builder's zstd blob of a digest was written (undefined: it has no such blob). */
  const writtenAt = (digest: string) =>
    stat(join(layout(), 'tern-zstd', 'blobs', 'sha256', digest.slice('sha256:'.length))).then(
      (s) => s.mtimeMs,
      () => undefined,
    );

  it('pushes zstd layers (what agents unpack fastest) and builds on such an image as a base', async () => {
    const manifest = await pushed(built);
    // The steps' layers; the base's, which the registry holds already, is mounted as it is (skopeo 1.9).
    expect(manifest.layers.slice(-3).map((l) => l.mediaType)).toEqual(Array(3).fill('application/vnd.oci.image.layer.v1.tar+zstd'));
    // The three steps ran in one unpacked bundle: the last layer holds its own one file, not the
    // packages of the steps before it again.
    expect(manifest.layers.at(-1)!.size).toBeLessThan(4096);
    const onTop = await buildImage(
      { commands: ['cat /opt/marker > /opt/on-top'] },
      {
        base: `${registry.host}/team/app@${built}`,
        target: `${registry.host}/team/app:on-top`,
        access: [registry.builder],
        layout: layout(),
        workDir: join(work, 'scratch'),
      },
    );
    const sandbox = await RuntimeSandbox.create({}, { registries: [registry.puller] });
    try {
      const id = containerId('on-top');
      await sandbox.runtime.start({ id, image: `${registry.host}/team/app@${onTop.digest}`, args: ['/bin/cat', '/opt/on-top'] });
      expect((await collectLogs(sandbox.runtime, id)).map((l) => l.line)).toEqual(['built']);
    } finally {
      await sandbox.destroy();
    }
  }, 300_000);

  it('rebuilds only from a changed step on, and pushes the unchanged layers as the zstd it made for them once', async () => {
    const before = (await pushed(built)).layers.slice(-3);
    // The zstd the registry got is the layout's own copy, kept for the next push.
    const madeAt = await Promise.all(before.map((l) => writtenAt(l.digest)));
    expect(madeAt.every((t) => t !== undefined)).toBe(true);
    const changed = await build({ ...spec, commands: ['echo changed > /opt/marker'] }, 'v2');
    expect(changed.steps.map((s) => [s.name, s.cached])).toEqual([
      ['apt', true],
      ['pip', true],
      ['commands[0]', false],
    ]);
    const after = (await pushed(changed.digest)).layers.slice(-3);
    expect(after.map((l) => l.mediaType)).toEqual(Array(3).fill('application/vnd.oci.image.layer.v1.tar+zstd'));
    expect(after.slice(0, 2).map((l) => l.digest)).toEqual(before.slice(0, 2).map((l) => l.digest));
    // apt's and pip's layers were not compressed again for this push.
    expect(await Promise.all(after.slice(0, 2).map((l) => writtenAt(l.digest)))).toEqual(madeAt.slice(0, 2));
    expect(after[2]!.digest).not.toBe(before[2]!.digest);
  }, 300_000);

  it('builds two identical specs started at once only once', async () => {
    const twin: ImageBuild = { commands: [`echo twin-${Date.now()} > /opt/twin`] };
    const [a, b] = await Promise.all([build(twin, 'twin-a'), build(twin, 'twin-b')]);
    expect(a.digest).toBe(b.digest);
    expect([a.steps[0]!.cached, b.steps[0]!.cached].sort()).toEqual([false, true]);
  }, 300_000);

  it('fails naming the step and the tail of its log, and pushes nothing', async () => {
    await expect(build({ commands: ['echo before; exit 3'] }, 'bad')).rejects.toThrow(
      /step commands\[0\] failed \(exit 3\): echo before; exit 3\nbefore/,
    );
    await expect(build({ apt: ['no-such-package-tern'] }, 'bad')).rejects.toThrow(
      /step apt failed \(exit 100\).*Unable to locate package no-such-package-tern/s,
    );
    const r = await execa(
      'skopeo',
      [
        'inspect',
        '--tls-verify=false',
        '--creds',
        `${registry.puller.username}:${registry.puller.password}`,
        `docker://${registry.host}/team/app:bad`,
      ],
      {
        reject: false,
      },
    );
    expect(r.exitCode).not.toBe(0);
  }, 300_000);

  it('refuses an unreachable base naming it', async () => {
    await expect(
      buildImage(
        { commands: ['true'] },
        { base: '127.0.0.1:1/x/y:1', target: `${registry.host}/team/app:x`, access: [], layout: layout(), workDir: join(work, 'scratch') },
      ),
    ).rejects.toThrow(ImageError);
  }, 120_000);
});
