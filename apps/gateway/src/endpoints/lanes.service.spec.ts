import { jest } from '@jest/globals';
import { TERN_CONFIG } from '#tern/config';
import { type DeploymentRecord, LOAD_REPORT, type RouteRecord, SCALE_BACKLOG } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { newTestService } from '../../../../test/support/test-service.js';
import { LanesService } from './lanes.service.js';
import { RoutesMirror } from './routes-mirror.js';

const route = (containerId: string, capacity = 1): RouteRecord => ({
  containerId,
  deploymentId: 'd1',
  version: 2,
  machineId: 'm-1',
  capacity,
  readyAt: '2026-01-01T00:00:00Z',
});

/** The service started, with the routing table its fake mirror holds and the change listener it registered. */
async function lanes() {
  const { sut, fake } = await newTestService(LanesService, [[TERN_CONFIG, { endpoints: { bufferSize: 2 } }]]);
  const table = fake(RoutesMirror);
  const routes: RouteRecord[] = [];
  const records = new Map<string, DeploymentRecord>([['d1.2', { state: 'active' } as Partial<DeploymentRecord> as DeploymentRecord]]);
  table.routesOf.mockImplementation(() => [...routes]);
  table.record.mockImplementation((id, version) => records.get(`${id}.${version}`));
  sut.onApplicationBootstrap();
  const changed = table.onChange.mock.calls[0][0];
  const messaging = fake(Messaging);
  messaging.publish.mockResolvedValue({} as never);
  return { sut, routes, records, changed, messaging };
}

describe('LanesService', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('keeps one lane per endpoint version, seeded with the routes the table has', async () => {
    const { sut, routes } = await lanes();
    routes.push(route('c-1'));
    const lane = sut.lane('d1', 2);
    expect(lane.tryAcquire()).toBe('c-1');
    expect(sut.lane('d1', 2)).toBe(lane);
    expect(sut.lane('d1', 3)).not.toBe(lane);
  });

  it('hands a waiting request the container that just became ready', async () => {
    const { sut, routes, changed } = await lanes();
    const waiting = sut.lane('d1', 2).acquire(30_000);
    routes.push(route('c-1'));
    changed('d1', 2);
    await expect(waiting).resolves.toEqual({ containerId: 'c-1' });
  });

  it('ends the waits of a version that was stopped or deleted, without their timeouts', async () => {
    for (const gone of ['stopped', 'deleted'] as const) {
      const { sut, records, changed } = await lanes();
      const waiting = sut.lane('d1', 2).acquire(30_000);
      if (gone === 'stopped') records.set('d1.2', { state: 'stopped' } as Partial<DeploymentRecord> as DeploymentRecord);
      else records.delete('d1.2');
      changed('d1', 2);
      await expect(waiting).resolves.toEqual({ error: 'timeout' });
    }
  });

  it('asks for capacity only while requests wait, naming how many and for how long', async () => {
    const { sut, messaging } = await lanes();
    const lane = sut.lane('d1', 2);
    sut.askForCapacity(lane);
    expect(messaging.publish).not.toHaveBeenCalled();
    expect(lane.acquire(30_000)).toBeInstanceOf(Promise);
    jest.advanceTimersByTime(300);
    sut.askForCapacity(lane);
    expect(messaging.publish).toHaveBeenCalledWith(
      SCALE_BACKLOG,
      expect.objectContaining({ deploymentId: 'd1', heldRequests: 1, oldestWaitMs: 300 }),
    );
  });

  it('reports the load of each busy lane every second, under its own gateway id, and nudges for capacity', async () => {
    const { sut, routes, messaging } = await lanes();
    routes.push(route('c-1'));
    const lane = sut.lane('d1', 2);
    lane.tryAcquire();
    expect(lane.acquire(30_000)).toBeInstanceOf(Promise);
    jest.advanceTimersByTime(1000);
    expect(messaging.emit).toHaveBeenCalledTimes(1);
    expect(messaging.emit).toHaveBeenCalledWith(
      LOAD_REPORT,
      expect.objectContaining({ gatewayId: sut.gatewayId, deploymentId: 'd1', version: 2, inFlight: 1, buffered: 1 }),
      ['d1'],
    );
    expect(sut.gatewayId).toMatch(/^gw-[A-Za-z0-9_-]+-[0-9a-f]{6}$/);
    expect(messaging.publish).toHaveBeenCalledWith(SCALE_BACKLOG, expect.objectContaining({ heldRequests: 1 }));
  });

  it('reports nothing for an idle lane, and forgets it once its version is gone', async () => {
    const { sut, messaging } = await lanes();
    const kept = sut.lane('d1', 2);
    const forgotten = sut.lane('d1', 3);
    jest.advanceTimersByTime(1000);
    expect(messaging.emit).not.toHaveBeenCalled();
    expect(sut.lane('d1', 2)).toBe(kept);
    expect(sut.lane('d1', 3)).not.toBe(forgotten);
  });

  it('a report that cannot go out does not stop the others', async () => {
    const { sut, routes, messaging } = await lanes();
    routes.push(route('c-1'));
    sut.lane('d1', 2).tryAcquire();
    sut.lane('d1', 3).tryAcquire();
    messaging.emit.mockImplementationOnce(() => {
      throw new Error('connection closed');
    });
    jest.advanceTimersByTime(1000);
    expect(messaging.emit).toHaveBeenCalledTimes(2);
  });
});
