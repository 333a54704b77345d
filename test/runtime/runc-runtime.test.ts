import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { ContainerStartError, waitForHealth } from '#tern/runtime';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { collectLogs, containerId, RuntimeSandbox } from './support.js';

const describeRunc = await describeNeeding(['root', 'runc']);

describeRunc('RuncRuntime with the host image', () => {
  let sandbox: RuntimeSandbox;

  beforeAll(async () => {
    sandbox = await RuntimeSandbox.create();
  });

  afterAll(async () => {
    await sandbox?.destroy();
  });

  it('runs a Node program that sees its env and a bind-mounted volume, as nobody, on a read-only root', async () => {
    const id = containerId('node-env');
    await mkdir(join(sandbox.volumeRoot, 'ws1', 'data'), { recursive: true });
    await writeFile(join(sandbox.volumeRoot, 'ws1', 'data', 'in.txt'), 'from the host');
    const program = `
      const fs = require('fs');
      console.log('greeting=' + process.env.GREETING + ' port=' + process.env.PORT + ' uid=' + process.getuid());
      console.log('volume=' + fs.readFileSync('/data/in.txt', 'utf8'));
      fs.writeFileSync('/data/out.txt', 'from the container');
      fs.writeFileSync('/tmp/scratch', 'tmp is writable');
      try { fs.writeFileSync('/etc/owned', 'x'); console.log('root=writable'); } catch (e) { console.log('root=' + e.code); }
      process.exit(3);
    `;
    const started = await sandbox.runtime.start({
      id,
      image: 'host',
      args: ['node', '-e', program],
      env: { GREETING: 'hello' },
      volumes: [{ name: 'ws1/data', containerPath: '/data' }],
      labels: { deployment: 'd1' },
    });
    expect(started.port).toBeGreaterThan(0);
    const lines = (await collectLogs(sandbox.runtime, id)).map((l) => `${l.stream}:${l.line}`);
    expect(lines).toEqual([`stdout:greeting=hello port=${started.port} uid=65534`, 'stdout:volume=from the host', 'stdout:root=EROFS']);
    expect(await sandbox.runtime.wait(id)).toMatchObject({ exitCode: 3, oomKilled: false });
    expect(await readFile(join(sandbox.volumeRoot, 'ws1', 'data', 'out.txt'), 'utf8')).toBe('from the container');
    const [listed] = (await sandbox.runtime.list()).filter((c) => c.id === id);
    expect(listed).toMatchObject({ status: 'stopped', labels: { deployment: 'd1' }, exit: { exitCode: 3 } });
    await sandbox.runtime.remove(id);
    expect((await sandbox.runtime.list()).map((c) => c.id)).not.toContain(id);
  });

  it('runs the host Python with a read-only volume', async () => {
    const id = containerId('python');
    await mkdir(join(sandbox.volumeRoot, 'models'), { recursive: true });
    await writeFile(join(sandbox.volumeRoot, 'models', 'm.txt'), 'weights');
    await sandbox.runtime.start({
      id,
      image: 'host',
      args: [
        'python3',
        '-c',
        [
          'import os, sys',
          'print(os.environ["GREETING"], open("/models/m.txt").read())',
          'try:\n  open("/models/new", "w")\nexcept OSError as e:\n  print("ro", e.errno)',
          'print("to stderr", file=sys.stderr)',
        ].join('\n'),
      ],
      env: { GREETING: 'hi' },
      volumes: [{ name: 'models', containerPath: '/models', readOnly: true }],
    });
    const lines = await collectLogs(sandbox.runtime, id);
    expect(lines.filter((l) => l.stream === 'stdout').map((l) => l.line)).toEqual(['hi weights', 'ro 30']);
    expect(lines.filter((l) => l.stream === 'stderr').map((l) => l.line)).toEqual(['to stderr']);
    expect(await sandbox.runtime.wait(id)).toMatchObject({ exitCode: 0, oomKilled: false });
    await sandbox.runtime.remove(id);
  });

  it('reports an allocation past the memory limit as OOM-killed', async () => {
    const id = containerId('oom');
    await sandbox.runtime.start({
      id,
      image: 'host',
      args: ['python3', '-c', 'blocks = []\nwhile True: blocks.append(bytearray(8 << 20))'],
      memoryBytes: 64 * 1024 * 1024,
    });
    const exit = await sandbox.runtime.wait(id);
    expect(exit).toMatchObject({ oomKilled: true, exitCode: null, signal: 'SIGKILL' });
    await sandbox.runtime.remove(id);
  });

  it('streams log lines while the container runs', async () => {
    const id = containerId('stream');
    await sandbox.runtime.start({
      id,
      image: 'host',
      args: ['node', '-e', "console.log('first'); console.error('oops'); setTimeout(() => console.log('second'), 1500)"],
    });
    const seen: { line: string; at: number }[] = [];
    for await (const l of sandbox.runtime.logs(id)) seen.push({ line: `${l.stream}:${l.line}`, at: Date.now() });
    const exit = await sandbox.runtime.wait(id);
    expect(seen.map((s) => s.line).sort()).toEqual(['stderr:oops', 'stdout:first', 'stdout:second']);
    const first = seen.find((s) => s.line === 'stdout:first')!;
    // The first line arrived while the process was still running, not after it ended.
    expect(Date.parse(exit.finishedAt) - first.at).toBeGreaterThan(800);
    await sandbox.runtime.remove(id);
  });

  it('stops with SIGTERM, and SIGKILLs after the grace period when SIGTERM is ignored', async () => {
    const polite = containerId('polite');
    const stubborn = containerId('stubborn');
    const server = (onTerm: string) =>
      `process.on('SIGTERM', () => { ${onTerm} }); require('http').createServer((q, s) => s.end('ok')).listen(process.env.PORT, '127.0.0.1')`;
    const a = await sandbox.runtime.start({ id: polite, image: 'host', args: ['node', '-e', server('process.exit(0)')] });
    const b = await sandbox.runtime.start({ id: stubborn, image: 'host', args: ['node', '-e', server("console.log('ignoring')")] });
    await waitForHealth({ port: a.port!, timeoutMs: 10_000 });
    await waitForHealth({ port: b.port!, timeoutMs: 10_000 });
    expect(await sandbox.runtime.stop(polite, 5000)).toMatchObject({ exitCode: 0, oomKilled: false });
    const t0 = Date.now();
    expect(await sandbox.runtime.stop(stubborn, 700)).toMatchObject({ exitCode: null, signal: 'SIGKILL' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(650);
    await sandbox.runtime.remove(polite);
    await sandbox.runtime.remove(stubborn);
  });

  it('applies CPU and pids limits to the container cgroup', async () => {
    const id = containerId('limits');
    await sandbox.runtime.start({
      id,
      image: 'host',
      args: [
        '/bin/sh',
        '-c',
        'cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes 2>&1 || cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max',
      ],
      cpuMillicores: 500,
      pidsLimit: 64,
      memoryBytes: 128 * 1024 * 1024,
    });
    const out = (await collectLogs(sandbox.runtime, id)).map((l) => l.line).join(' ');
    expect(out).toMatch(/64/);
    expect(out).toMatch(/50000/);
    expect(out).toMatch(String(128 * 1024 * 1024));
    await sandbox.runtime.remove(id);
  });

  it('keeps a fork bomb inside its container: the neighbour and the host still start processes', async () => {
    const bomb = containerId('forkbomb');
    // Forks forever; each child sleeps. Only the pids limit stops it.
    const program = [
      'import os, time',
      'while True:',
      '  try:',
      '    if os.fork() == 0: time.sleep(600)',
      '  except OSError:',
      '    time.sleep(0.001)',
    ].join('\n');
    await sandbox.runtime.start({ id: bomb, image: 'host', args: ['python3', '-c', program], pidsLimit: 64 });
    const countPids = async () => {
      const tasks = await execa('sh', ['-c', `cat $(find /sys/fs/cgroup/pids -type d -name '*${bomb}*' | head -1)/pids.current`], {
        reject: false,
      });
      return Number(tasks.stdout.trim());
    };
    await waitFor('the bomb at its limit', async () => (await countPids()) >= 60, 20_000, 100);
    await new Promise((r) => setTimeout(r, 500));
    expect(await countPids()).toBeLessThanOrEqual(64);

    const neighbour = containerId('neighbour');
    await sandbox.runtime.start({
      id: neighbour,
      image: 'host',
      args: ['/bin/sh', '-c', 'for i in 1 2 3 4 5 6 7 8; do /bin/true || exit 1; done; echo neighbour-ok'],
    });
    expect((await collectLogs(sandbox.runtime, neighbour)).map((l) => l.line)).toContain('neighbour-ok');
    expect((await execa('true')).exitCode).toBe(0);
    expect((await sandbox.runtime.list()).find((c) => c.id === bomb)?.status).toBe('running');

    await sandbox.runtime.stop(bomb, 500);
    await sandbox.runtime.remove(bomb);
    await sandbox.runtime.remove(neighbour);
  });

  it('reports a program that exits at once as started, then exited with its code, never as a failed start', async () => {
    for (let i = 0; i < 10; i++) {
      const id = containerId(`instant-${i}`);
      const started = await sandbox.runtime.start({ id, image: 'host', args: ['/bin/sh', '-c', 'exit 7'] });
      expect(started.pid).toBeGreaterThan(0);
      expect(await sandbox.runtime.wait(id)).toMatchObject({ exitCode: 7 });
      await sandbox.runtime.remove(id);
    }
  });

  it('fails a start whose program does not exist, and leaves nothing behind', async () => {
    const id = containerId('missing');
    await expect(sandbox.runtime.start({ id, image: 'host', args: ['/no/such/program'] })).rejects.toThrow(ContainerStartError);
    await expect(sandbox.runtime.start({ id, image: 'host', args: ['/no/such/program'] })).rejects.toThrow(/no such file/);
    expect((await sandbox.runtime.list()).map((c) => c.id)).not.toContain(id);
  });
});
