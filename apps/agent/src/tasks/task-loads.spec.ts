import type { AgentLoadReport } from '#tern/contracts';
import type { Messaging } from '#tern/messaging';
import type { ContainerRecord } from '../containers/container-spec.js';
import { TaskLoads } from './task-loads.js';

const record = (containerId: string, version = 1): ContainerRecord => ({
  containerId,
  deploymentId: 'd-1',
  deploymentVersion: version,
  workspaceId: 'w-1',
  kind: 'task_queue',
  gpus: [],
  cpuMillicores: 1000,
  memoryBytes: 2 ** 29,
  requestedAt: new Date(0).toISOString(),
  workers: 2,
  concurrency: 1,
});

describe('task loads', () => {
  // reports() is pure over what was tracked; nothing is published in these tests.
  const loads = () => new TaskLoads(undefined as unknown as Messaging, 'm1');

  it('reports tasks running per container, idle time, and a running mean of durations per version', () => {
    const l = loads();
    l.track(record('c-1'));
    l.track(record('c-2'));
    l.begin('c-1');
    l.begin('c-1');
    l.end('c-1', 1000);
    l.end('c-2', 3000);
    const now = Date.now() + 5000;
    const [r] = l.reports(now) as [AgentLoadReport];
    expect(r).toMatchObject({ gatewayId: 'agent-m1', deploymentId: 'd-1', version: 1, inFlight: 1, buffered: 0 });
    expect(r.meanDurationMs).toBeCloseTo(1000 + 0.3 * 2000);
    expect(r.containers.find((c) => c.containerId === 'c-1')).toMatchObject({ inFlight: 1, idleSeconds: 0 });
    expect(r.containers.find((c) => c.containerId === 'c-2')!.idleSeconds).toBeGreaterThanOrEqual(4.9);
    // The mean outlives a report with no finished task.
    expect((l.reports(now + 1000)[0] as AgentLoadReport).meanDurationMs).toBeCloseTo(1600);
  });

  it('sends one empty report after a version loses its last container here, then nothing', () => {
    const l = loads();
    l.track(record('c-1', 2));
    expect(l.reports(Date.now())).toHaveLength(1);
    l.untrack('c-1');
    expect(l.reports(Date.now())).toEqual([expect.objectContaining({ version: 2, inFlight: 0, containers: [] })]);
    expect(l.reports(Date.now())).toEqual([]);
  });
});
