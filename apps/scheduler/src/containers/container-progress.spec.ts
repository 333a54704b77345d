import { CONTAINER_STATES } from '#tern/contracts';
import { CONTAINER_STATE_ORDER, isForward, progressFor } from './container-progress.js';

const base = {
  containerId: 'c1',
  deploymentId: 'd1',
  deploymentVersion: 1,
  workspaceId: 'w1',
  machineId: 'm1',
  at: '2026-01-01T00:00:00.000Z',
};
const resources = { cpuMillicores: 1000, memoryBytes: 1 << 30, gpuCount: 1, gpuType: 'H100' };

describe('container progress', () => {
  it('orders every container state', () => {
    expect([...CONTAINER_STATE_ORDER].sort()).toEqual([...CONTAINER_STATES].sort());
  });

  it('only moves forward, and failed outranks stopped', () => {
    expect(isForward('scheduled', 'running')).toBe(true);
    expect(isForward('running', 'starting')).toBe(false);
    expect(isForward('running', 'running')).toBe(false);
    expect(isForward('stopped', 'failed')).toBe(true);
    expect(isForward('failed', 'stopped')).toBe(false);
  });

  it('maps each event to what it says about the row', () => {
    expect(progressFor({ kind: 'scheduled', event: { ...base, resources, reason: 'scale-up' } })).toEqual({
      state: 'scheduled',
      reason: 'scale-up',
      requested: { cpuMillicores: 1000, memoryBytes: 1 << 30, gpuCount: 1, gpu: 'H100' },
    });
    expect(
      progressFor({
        kind: 'started',
        event: { ...base, resources: { ...resources, gpuType: undefined, gpuCount: 0 }, startupLatencyMs: 5 },
      }),
    ).toEqual({
      state: 'running',
      reason: null,
      requested: { cpuMillicores: 1000, memoryBytes: 1 << 30, gpuCount: 0 },
      startedAt: base.at,
    });
    expect(progressFor({ kind: 'ready', event: { ...base, readyLatencyMs: 9 } })).toMatchObject({ state: 'running', readyAt: base.at });
    expect(progressFor({ kind: 'stopped', event: { ...base, exitCode: 137, oomKilled: true, reason: 'oom', signal: 'SIGKILL' } })).toEqual({
      state: 'stopped',
      reason: 'oom (SIGKILL)',
      stoppedAt: base.at,
      exitCode: 137,
      oomKilled: true,
    });
    expect(progressFor({ kind: 'failed', event: { ...base, phase: 'health', error: 'no answer on /health' } })).toEqual({
      state: 'failed',
      reason: 'health: no answer on /health',
      stoppedAt: base.at,
    });
  });
});
