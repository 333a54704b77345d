import type { AgentLoadReport, RouteRecord, ServerLoadReport } from '#tern/contracts';
import { placedPartOf, placedServerLoads, UNPLACED_WARN_AFTER_MS, UnplacedStreaks } from './machine-reports.js';

describe('placedPartOf', () => {
  const routes: Record<string, RouteRecord> = {
    'c-1': { containerId: 'c-1', deploymentId: 'd-1', version: 1, machineId: 'm-1', capacity: 1, readyAt: '' },
    'c-2': { containerId: 'c-2', deploymentId: 'd-1', version: 1, machineId: 'm-2', capacity: 1, readyAt: '' },
  };
  const report = (containers: { containerId: string; inFlight: number }[], machineId = 'm-1'): AgentLoadReport => ({
    gatewayId: 'anything',
    machineId,
    deploymentId: 'd-1',
    version: 1,
    inFlight: 999,
    buffered: 999,
    meanDurationMs: 40,
    containers: containers.map((c) => ({ ...c, idleSeconds: 0 })),
    at: new Date(0).toISOString(),
  });
  const routeOf = (id: string) => routes[id];

  it('keeps the containers placed on the reporting machine and sums them, whatever totals it claims', () => {
    const placed = placedPartOf(
      report([
        { containerId: 'c-1', inFlight: 3 },
        { containerId: 'c-2', inFlight: 50 },
        { containerId: 'c-ghost', inFlight: 50 },
      ]),
      routeOf,
    );
    expect(placed).toMatchObject({ gatewayId: 'agent-m-1', inFlight: 3, buffered: 0, containers: [{ containerId: 'c-1', inFlight: 3 }] });
  });

  it('believes nothing of a report about containers placed elsewhere or for another version', () => {
    expect(placedPartOf(report([{ containerId: 'c-2', inFlight: 50 }]), routeOf)).toBeUndefined();
    expect(placedPartOf({ ...report([{ containerId: 'c-1', inFlight: 5 }]), version: 2 }, routeOf)).toBeUndefined();
  });

  it('takes an empty last report, with nothing in flight', () => {
    expect(placedPartOf(report([]), routeOf)).toMatchObject({ inFlight: 0, containers: [] });
  });
});

describe('UnplacedStreaks', () => {
  it('warns once, when a machine has named only unplaced containers for UNPLACED_WARN_AFTER_MS', () => {
    const streaks = new UnplacedStreaks();
    const warned = [0, 1_000, UNPLACED_WARN_AFTER_MS - 1, UNPLACED_WARN_AFTER_MS, UNPLACED_WARN_AFTER_MS + 1_000].map((t) =>
      streaks.refused('d-1.1', 'm-1', t),
    );
    expect(warned).toEqual([false, false, false, true, false]);
  });

  it('starts over after a counted report, and keeps machines and versions apart', () => {
    const streaks = new UnplacedStreaks();
    streaks.refused('d-1.1', 'm-1', 0);
    streaks.refused('d-1.1', 'm-2', 0);
    streaks.counted('d-1.1', 'm-1');
    expect(streaks.refused('d-1.1', 'm-1', UNPLACED_WARN_AFTER_MS)).toBe(false);
    expect(streaks.refused('d-1.2', 'm-2', UNPLACED_WARN_AFTER_MS)).toBe(false);
    expect(streaks.refused('d-1.1', 'm-2', UNPLACED_WARN_AFTER_MS)).toBe(true);
    expect(streaks.refused('d-1.1', 'm-1', 2 * UNPLACED_WARN_AFTER_MS)).toBe(true);
  });

  it('forgets a version that is gone', () => {
    const streaks = new UnplacedStreaks();
    streaks.refused('d-1.1', 'm-1', 0);
    streaks.forget('d-1.1');
    expect(streaks.refused('d-1.1', 'm-1', UNPLACED_WARN_AFTER_MS)).toBe(false);
  });
});

describe('placedServerLoads', () => {
  const routes: Record<string, RouteRecord> = {
    'c-1': { containerId: 'c-1', deploymentId: 'd-1', version: 1, machineId: 'm-1', capacity: 1, readyAt: '' },
    'c-2': { containerId: 'c-2', deploymentId: 'd-1', version: 1, machineId: 'm-2', capacity: 1, readyAt: '' },
    'c-3': { containerId: 'c-3', deploymentId: 'd-2', version: 1, machineId: 'm-1', capacity: 1, readyAt: '' },
  };
  const routeOf = (id: string) => routes[id];
  const report = (containers: { containerId: string; load: number }[], extra: Partial<ServerLoadReport> = {}): ServerLoadReport => ({
    machineId: 'm-1',
    deploymentId: 'd-1',
    version: 1,
    containers,
    at: new Date(0).toISOString(),
    ...extra,
  });

  it("keeps only loads of the reporting machine's own containers of that version", () => {
    const loads = [
      { containerId: 'c-1', load: 4 },
      { containerId: 'c-2', load: 900 },
      { containerId: 'c-3', load: 900 },
      { containerId: 'c-ghost', load: 900 },
    ];
    expect(placedServerLoads(report(loads), routeOf)).toEqual([{ containerId: 'c-1', load: 4 }]);
    expect(placedServerLoads(report(loads, { version: 2 }), routeOf)).toEqual([]);
    expect(placedServerLoads(report(loads, { machineId: 'm-2' }), routeOf)).toEqual([{ containerId: 'c-2', load: 900 }]);
  });
});
