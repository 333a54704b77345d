import { combineLoads, type GatewayLoad, SERVER_LOAD_MAX_AGE_MS, withBacklog, withServerLoads } from './loads.js';

const now = 100_000;
const report = (gatewayId: string, fields: Partial<GatewayLoad> = {}): GatewayLoad => ({
  gatewayId,
  inFlight: 0,
  buffered: 0,
  meanDurationMs: 0,
  containers: [],
  receivedAt: now,
  ...fields,
});

describe('combineLoads', () => {
  it('sums in-flight and buffered requests over gateways', () => {
    const o = combineLoads([report('g1', { inFlight: 10, buffered: 1 }), report('g2', { inFlight: 21 })], now);
    expect(o).toMatchObject({ inFlight: 31, buffered: 1 });
  });

  it('drops reports older than 3 s (a gateway that went away)', () => {
    const o = combineLoads(
      [report('g1', { inFlight: 10, receivedAt: now - 3001 }), report('g2', { inFlight: 2, receivedAt: now - 2000 })],
      now,
    );
    expect(o.inFlight).toBe(2);
  });

  it('merges a container seen by several gateways: in-flight summed, idle as the latest user says', () => {
    const o = combineLoads(
      [
        report('g1', { containers: [{ containerId: 'c1', inFlight: 0, idleSeconds: 200 }] }),
        report('g2', {
          containers: [
            { containerId: 'c1', inFlight: 2, idleSeconds: 0 },
            { containerId: 'c2', inFlight: 0, idleSeconds: 5 },
          ],
        }),
      ],
      now,
    );
    expect(o.containers).toEqual([
      { containerId: 'c1', inFlight: 2, idleSeconds: 0 },
      { containerId: 'c2', inFlight: 0, idleSeconds: 5 },
    ]);
  });

  it('weights the mean duration by in-flight requests, else averages the measured ones', () => {
    expect(
      combineLoads([report('g1', { inFlight: 3, meanDurationMs: 1000 }), report('g2', { inFlight: 1, meanDurationMs: 5000 })], now)
        .meanDurationMs,
    ).toBe(2000);
    expect(
      combineLoads([report('g1', { meanDurationMs: 1000 }), report('g2', { meanDurationMs: 3000 }), report('g3')], now).meanDurationMs,
    ).toBe(2000);
  });

  it('observes nothing without reports', () => {
    expect(combineLoads([], now)).toEqual({ inFlight: 0, buffered: 0, meanDurationMs: 0, containers: [] });
  });
});

describe('withBacklog', () => {
  it('counts held requests as buffered when reports have not caught up', () => {
    expect(withBacklog(combineLoads([], now), 3).buffered).toBe(3);
  });

  it('does not add them twice when a report already counts them', () => {
    expect(withBacklog(combineLoads([report('g1', { buffered: 5 })], now), 3).buffered).toBe(5);
  });

  it('does not count held requests that have since got a container as waiting too', () => {
    const o = withBacklog(combineLoads([report('g1', { inFlight: 4, buffered: 2 })], now), 6);
    expect(o).toMatchObject({ inFlight: 4, buffered: 2 });
    expect(withBacklog(combineLoads([report('g1', { inFlight: 2, buffered: 0 })], now), 6)).toMatchObject({ inFlight: 2, buffered: 4 });
  });
});

describe('withServerLoads', () => {
  const o = combineLoads(
    [
      report('g1', {
        containers: [
          { containerId: 'a', inFlight: 1, idleSeconds: 0 },
          { containerId: 'b', inFlight: 0, idleSeconds: 4 },
        ],
      }),
    ],
    now,
  );

  it('sets the load of each ready container that reported lately', () => {
    const loads = new Map([
      ['a', { load: 7, receivedAt: now - 1000, readyAt: 0 }],
      ['b', { load: 2, receivedAt: now - SERVER_LOAD_MAX_AGE_MS - 1, readyAt: 0 }],
    ]);
    const withLoads = withServerLoads(o, loads, now);
    expect(withLoads.containers).toEqual([
      { containerId: 'a', inFlight: 1, idleSeconds: 0, load: 7 },
      { containerId: 'b', inFlight: 0, idleSeconds: 4 },
    ]);
    expect(withLoads.inFlight).toBe(o.inFlight);
  });

  it('adds a container no gateway reports, idle since it became ready, unless its report is stale', () => {
    const loads = new Map([
      ['c', { load: 12, receivedAt: now - 500, readyAt: now - 30_000 }],
      ['d', { load: 12, receivedAt: now - SERVER_LOAD_MAX_AGE_MS - 1, readyAt: now - 30_000 }],
      ['e', { load: 1, receivedAt: now, readyAt: now + 5000 }],
    ]);
    expect(withServerLoads(combineLoads([], now), loads, now).containers).toEqual([
      { containerId: 'c', inFlight: 0, idleSeconds: 30, load: 12 },
      { containerId: 'e', inFlight: 0, idleSeconds: 0, load: 1 },
    ]);
  });

  it('leaves the observation as it was without reports', () => {
    expect(withServerLoads(o, new Map(), now)).toBe(o);
  });
});
