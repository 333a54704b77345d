import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { reconcile, type ContainerSpec } from '#tern/runtime';
import { describeNeeding } from '../support/real-parts.js';
import { containerId, isRunning, RuntimeSandbox } from './support.js';
import { transpileRuntimeLib } from './transpile.js';

const describeRunc = await describeNeeding(['root', 'runc']);

/** The agent stand-in: starts containers with the runtime lib, says so, then waits to be killed. */
const OWNER = `
const [entry, stateDir, imagesDir, specsJson] = process.argv.slice(2);
const { ImageStore, RuncRuntime } = await import(entry);
const runtime = new RuncRuntime({ stateDir, images: new ImageStore({ root: imagesDir }) });
for (const spec of JSON.parse(specsJson)) await runtime.start(spec);
process.stdout.write('started\\n');
setInterval(() => undefined, 60_000);
`;

describeRunc('reconcile after the owning process dies', () => {
  let sandbox: RuntimeSandbox;
  let lib: Awaited<ReturnType<typeof transpileRuntimeLib>>;

  beforeAll(async () => {
    sandbox = await RuntimeSandbox.create();
    lib = await transpileRuntimeLib();
  });

  afterAll(async () => {
    await sandbox?.destroy();
    await lib?.cleanup();
  });

  it('keeps containers running past the owner’s death; a new instance adopts or kills each, leaving none unknown', async () => {
    const ticker = "process.on('SIGTERM', () => process.exit(0)); setInterval(() => console.log('tick'), 100)";
    const wanted: ContainerSpec = { id: containerId('wanted'), image: 'host', args: ['node', '-e', ticker], labels: { deployment: 'd1' } };
    const orphan: ContainerSpec = {
      id: containerId('orphan'),
      image: 'host',
      args: ['node', '-e', ticker],
      labels: { deployment: 'gone' },
    };
    const finisher: ContainerSpec = { id: containerId('finisher'), image: 'host', args: ['/bin/sh', '-c', 'sleep 1; exit 7'] };

    const ownerScript = join(sandbox.dir, 'owner.mjs');
    await writeFile(ownerScript, OWNER);
    const owner = spawn(
      process.execPath,
      [
        ownerScript,
        pathToFileURL(lib.entry).href,
        sandbox.stateDir,
        join(sandbox.dir, 'images'),
        JSON.stringify([wanted, orphan, finisher]),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const [chunk] = (await once(owner.stdout!, 'data')) as [Buffer];
    expect(chunk.toString()).toContain('started');
    owner.kill('SIGKILL');
    await once(owner, 'exit');

    const root = sandbox.runtime.runcRoot;
    expect(await isRunning(root, wanted.id)).toBe(true);
    expect(await isRunning(root, orphan.id)).toBe(true);

    // A fresh instance, knowing nothing but the state on disk.
    const restarted = sandbox.newInstance();
    await restarted.wait(finisher.id); // exits while no agent runs
    const listed = await restarted.list();
    expect(listed.map((c) => c.id).sort()).toEqual([finisher.id, orphan.id, wanted.id].sort());

    const report = await reconcile(restarted, {
      decide: (c) => (c.labels.deployment === 'd1' ? 'adopt' : 'kill'),
      graceMs: 2000,
    });
    expect(report.failed).toEqual([]);
    expect(report.adopted.map((c) => c.id)).toEqual([wanted.id]);
    expect(report.killed.map((k) => k.container.id)).toEqual([orphan.id]);
    expect(report.killed[0]!.exit).toMatchObject({ exitCode: 0 });
    expect(report.exited).toEqual([
      expect.objectContaining({
        container: expect.objectContaining({ id: finisher.id }),
        exit: expect.objectContaining({ exitCode: 7 }),
        removed: true,
      }),
    ]);
    expect((await restarted.list()).map((c) => c.id)).toEqual([wanted.id]);

    // The adopted container still runs, still logs, and its shim still reports its exit.
    expect(await isRunning(root, wanted.id)).toBe(true);
    const lines: string[] = [];
    for await (const l of restarted.logs(wanted.id, { follow: false })) lines.push(l.line);
    expect(lines.filter((l) => l === 'tick').length).toBeGreaterThan(3);
    expect(await restarted.stop(wanted.id, 2000)).toMatchObject({ exitCode: 0, oomKilled: false });
    await restarted.remove(wanted.id);
    expect(await restarted.list()).toEqual([]);
  });

  it('still stops and reports a container whose shim was killed (exit status lost, not the container)', async () => {
    const id = containerId('shimless');
    await sandbox.runtime.start({ id, image: 'host', args: ['node', '-e', 'setInterval(() => undefined, 1000)'] });
    const shimPid = Number(await readFile(join(sandbox.stateDir, 'containers', id, 'shim.pid'), 'utf8'));
    const children = (await readFile(`/proc/${shimPid}/task/${shimPid}/children`, 'utf8')).trim().split(/\s+/).map(Number);
    // The shim first: killed after its child, it could still write the child's exit status.
    for (const pid of [shimPid, ...children]) process.kill(pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    expect(await isRunning(sandbox.runtime.runcRoot, id)).toBe(true);
    const restarted = sandbox.newInstance();
    expect((await restarted.list()).find((c) => c.id === id)?.status).toBe('running');
    expect(await restarted.stop(id, 300)).toMatchObject({ exitCode: null, oomKilled: false });
    await restarted.remove(id);
    expect(await restarted.list()).toEqual([]);
  });
});
