import { reconcile } from './reconcile.js';
import type { ContainerRuntime, ExitResult, ManagedContainer } from './types.js';

const container = (id: string, status: ManagedContainer['status'], exit?: ExitResult): ManagedContainer => ({
  id,
  runtime: 'runc',
  image: { ref: 'host', digest: 'sha256:x' },
  labels: { deployment: id.split('-')[0]! },
  startedAt: '2026-01-01T00:00:00Z',
  status,
  ...(exit ? { exit } : {}),
});

function fakeRuntime(containers: ManagedContainer[]) {
  const calls: string[] = [];
  const rt: ContainerRuntime = {
    kind: 'runc',
    start: async () => {
      throw new Error('unused');
    },
    stop: async (id) => {
      calls.push(`stop ${id}`);
      if (id.startsWith('broken')) throw new Error('runc said no');
      return { exitCode: 0, oomKilled: false, finishedAt: 'now' };
    },
    wait: async () => ({ exitCode: 0, oomKilled: false, finishedAt: 'now' }),
    list: async () => containers,
    adopt: async (id) => {
      calls.push(`adopt ${id}`);
      return containers.find((c) => c.id === id)!;
    },
    logs: async function* () {},
    remove: async (id) => {
      calls.push(`remove ${id}`);
    },
  };
  return { rt, calls };
}

describe('reconcile', () => {
  it('adopts wanted live containers, kills unwanted ones, reports and clears exited ones', async () => {
    const exit: ExitResult = { exitCode: 7, oomKilled: false, finishedAt: 'then' };
    const { rt, calls } = fakeRuntime([
      container('keep-1', 'running'),
      container('drop-1', 'running'),
      container('keep-2', 'stopped', exit),
      container('drop-2', 'stopped', exit),
      container('drop-3', 'unknown'),
      container('broken-1', 'running'),
    ]);
    const report = await reconcile(rt, { decide: (c) => (c.labels.deployment === 'keep' ? 'adopt' : 'kill'), graceMs: 5 });
    expect(report.adopted.map((c) => c.id)).toEqual(['keep-1']);
    expect(report.killed.map((k) => k.container.id)).toEqual(['drop-1']);
    expect(report.exited.map((e) => [e.container.id, e.removed, e.exit?.exitCode])).toEqual([
      ['keep-2', false, 7],
      ['drop-2', true, 7],
      ['drop-3', true, undefined],
    ]);
    expect(report.failed.map((f) => f.container.id)).toEqual(['broken-1']);
    expect(calls).toEqual(['adopt keep-1', 'stop drop-1', 'remove drop-1', 'remove drop-2', 'remove drop-3', 'stop broken-1']);
  });
});
