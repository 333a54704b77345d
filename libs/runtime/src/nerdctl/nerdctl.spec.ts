import type { ImageStore } from '../images/image-store.js';
import type { PreparedImage } from '../images/prepared-image.js';
import { gpusFlag, managedFromInspect, type NerdctlInspect, nerdctlRunArgs, parseTimestamped } from './nerdctl-args.js';
import { type ExecResult, merge, NerdctlRuntime } from './nerdctl-runtime.js';

const image: PreparedImage = {
  ref: 'host',
  digest: 'sha256:abc',
  rootfs: '/var/lib/tern/images/host/abc/rootfs',
  mounts: [{ destination: '/usr', type: 'bind', source: '/usr', options: ['rbind', 'ro'] }],
  env: [],
  entrypoint: [],
  cmd: [],
  sharesHostUsr: true,
};

const inspect = (over: Partial<NerdctlInspect['State']> = {}, labels: Record<string, string> = {}): NerdctlInspect => ({
  Id: 'f00',
  Name: 'tt-web',
  State: { Status: 'running', Running: true, Pid: 42, ...over },
  Config: {
    Labels: {
      'dev.tern.managed': 'true',
      'dev.tern.image': 'host',
      'dev.tern.image.digest': 'sha256:abc',
      'dev.tern.labels': '{"deployment":"d1"}',
      'dev.tern.port': '8123',
      'dev.tern.created': '2026-01-01T00:00:00.000Z',
      ...labels,
    },
  },
});

describe('nerdctl run arguments', () => {
  it('carry the same defaults as the runc config', () => {
    const args = nerdctlRunArgs({
      spec: {
        id: 'tt-web',
        image: 'host',
        memoryBytes: 512 << 20,
        cpuMillicores: 1500,
        pidsLimit: 128,
        labels: { deployment: 'd1' },
        gpus: { devices: [{ index: 0 }, { index: 2 }] },
      },
      image,
      env: ['PATH=/usr/bin', 'PORT=8123'],
      args: ['python3', '-m', 'http.server'],
      user: { uid: 65534, gid: 65534 },
      port: 8123,
      volumes: [{ source: '/vol/ws/data', destination: '/data', readOnly: false }],
      created: '2026-01-01T00:00:00.000Z',
      nofile: 16384,
      tmpBytes: 1024,
      shmBytes: 2048,
    });
    const pairs = (flag: string) => args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
    expect(args.slice(0, 4)).toEqual(['run', '-d', '--name', 'tt-web']);
    expect(pairs('--label')).toEqual(
      expect.arrayContaining([
        'dev.tern.managed=true',
        'dev.tern.labels={"deployment":"d1"}',
        'dev.tern.port=8123',
        'dev.tern.image.digest=sha256:abc',
      ]),
    );
    expect(pairs('--network')).toEqual(['host']);
    expect(pairs('--user')).toEqual(['65534:65534']);
    expect(args).toContain('--read-only');
    expect(pairs('--tmpfs')).toEqual(['/tmp:rw,nosuid,nodev,mode=1777,size=1024']);
    expect(pairs('--security-opt')).toEqual(['no-new-privileges']);
    expect(pairs('--cap-drop')).toEqual(['ALL']);
    expect(pairs('--memory')).toEqual([String(512 << 20)]);
    expect(pairs('--memory-swap')).toEqual([String(512 << 20)]);
    expect(pairs('--cpus')).toEqual(['1.500']);
    expect(pairs('--pids-limit')).toEqual(['128']);
    expect(pairs('-e')).toEqual(['PATH=/usr/bin', 'PORT=8123']);
    expect(pairs('-v')).toEqual(['/usr:/usr:ro', '/vol/ws/data:/data:rw']);
    expect(pairs('--gpus')).toEqual(['"device=0,2"']);
    expect(args.slice(-5)).toEqual(['--rootfs', image.rootfs, 'python3', '-m', 'http.server']);
  });

  it('names GPUs by UUID when known', () => {
    expect(gpusFlag({ id: 'x', image: 'host', gpus: { devices: [{ index: 1, uuid: 'GPU-1' }] } })).toBe('device=GPU-1');
    expect(gpusFlag({ id: 'x', image: 'host' })).toBeUndefined();
  });
});

describe('nerdctl inspect and logs parsing', () => {
  it('maps a Tern container, its labels and its exit', () => {
    expect(managedFromInspect(inspect())).toMatchObject({
      id: 'tt-web',
      status: 'running',
      port: 8123,
      pid: 42,
      labels: { deployment: 'd1' },
    });
    expect(
      managedFromInspect(inspect({ Status: 'exited', Running: false, ExitCode: 137, OOMKilled: true, FinishedAt: '2026-01-01T00:01:00Z' })),
    ).toMatchObject({
      status: 'stopped',
      exit: { exitCode: null, signal: 'SIGKILL', oomKilled: true, finishedAt: '2026-01-01T00:01:00Z' },
    });
    expect(managedFromInspect(inspect({}, { 'dev.tern.managed': 'false' }))).toBeUndefined();
  });

  it('splits the timestamp off a log line', () => {
    const p = parseTimestamped('2026-01-01T00:00:01.123456789Z hello world');
    expect(p.line).toBe('hello world');
    expect(p.time.toISOString()).toBe('2026-01-01T00:00:01.123Z');
    expect(parseTimestamped('no stamp').line).toBe('no stamp');
  });

  it('merges streams in arrival order', async () => {
    async function* gen(items: string[], delay: number) {
      for (const i of items) {
        await new Promise((r) => setTimeout(r, delay));
        yield i;
      }
    }
    const out: string[] = [];
    for await (const x of merge([gen(['a1', 'a2'], 5), gen(['b1'], 1)])) out.push(x);
    expect(out.sort()).toEqual(['a1', 'a2', 'b1']);
  });
});

describe('NerdctlRuntime commands', () => {
  function runtime(responses: (args: string[]) => ExecResult) {
    const calls: string[][] = [];
    const rt = new NerdctlRuntime({
      images: { resolve: async () => image } as unknown as ImageStore,
      volumeRoot: '/vol',
      exec: async (args) => {
        calls.push(args);
        return responses(args);
      },
      stream: async function* () {
        yield { stream: 'stdout', line: '2026-01-01T00:00:00Z ready' };
        yield { stream: 'stderr', line: '2026-01-01T00:00:01Z warn' };
      },
    });
    return { rt, calls };
  }
  const json = (v: unknown): ExecResult => ({ exitCode: 0, stdout: JSON.stringify(v), stderr: '' });

  it('stops with a grace period in seconds, then reads the exit from inspect', async () => {
    let stopped = false;
    const { rt, calls } = runtime((args) => {
      if (args.includes('stop')) {
        stopped = true;
        return { exitCode: 0, stdout: '', stderr: '' };
      }
      return json([stopped ? inspect({ Status: 'exited', Running: false, ExitCode: 143 }) : inspect()]);
    });
    expect(await rt.stop('tt-web', 2500)).toMatchObject({ exitCode: null, signal: 'SIGTERM', oomKilled: false });
    expect(calls).toContainEqual(['--namespace', 'tern', 'stop', '-t', '3', 'tt-web']);
  });

  it('lists by label and removes with rm -f', async () => {
    const { rt, calls } = runtime((args) =>
      args.includes('ps')
        ? { exitCode: 0, stdout: 'f00\n', stderr: '' }
        : args.includes('rm')
          ? { exitCode: 0, stdout: '', stderr: '' }
          : json([inspect()]),
    );
    expect((await rt.list()).map((c) => c.id)).toEqual(['tt-web']);
    expect(calls[0]).toEqual(['--namespace', 'tern', 'ps', '-a', '-q', '--no-trunc', '--filter', 'label=dev.tern.managed=true']);
    expect(calls[1]).toEqual(['--namespace', 'tern', 'inspect', '--mode', 'dockercompat', 'f00']);
    await rt.remove('tt-web');
    expect(calls.at(-1)).toEqual(['--namespace', 'tern', 'rm', '-f', 'tt-web']);
  });

  it('starts with nerdctl run -d and reports the pid', async () => {
    let ran = false;
    const { rt, calls } = runtime((args) => {
      if (args.includes('run')) {
        ran = true;
        return { exitCode: 0, stdout: 'f00\n', stderr: '' };
      }
      return ran ? json([inspect()]) : { exitCode: 1, stdout: '', stderr: 'no such container' };
    });
    const c = await rt.start({ id: 'tt-web', image: 'host', args: ['node', 'server.js'], port: 8123 });
    expect(c).toMatchObject({ id: 'tt-web', runtime: 'nerdctl', port: 8123, pid: 42 });
    const run = calls.find((a) => a.includes('run'))!;
    expect(run.slice(0, 6)).toEqual(['--namespace', 'tern', 'run', '-d', '--name', 'tt-web']);
    expect(run.slice(-2)).toEqual(['node', 'server.js']);
  });

  it('parses followed log lines', async () => {
    const { rt } = runtime(() => json([]));
    const lines = [];
    for await (const l of rt.logs('tt-web')) lines.push(`${l.stream}:${l.line}`);
    expect(lines).toEqual(['stdout:ready', 'stderr:warn']);
  });
});
