import { checkpointSlices, closedSlices, earliestEnd, endOfUsage, observedEnd, observedStart } from './accrual.js';
import { HOUR_MS, hourFloor, intervalId, splitAtHours } from './intervals.js';
import { overlapSeconds, resourceSeconds } from './resources.js';

const t = (iso: string) => Date.parse(iso);

describe('splitAtHours', () => {
  it('keeps a span inside one hour whole', () => {
    expect(splitAtHours(t('2026-01-01T10:05:00Z'), t('2026-01-01T10:35:30Z'))).toEqual([
      { periodStart: t('2026-01-01T10:05:00Z'), periodEnd: t('2026-01-01T10:35:30Z'), seconds: 1830 },
    ]);
  });

  it('cuts at every hour boundary, and the slices add up to the span', () => {
    const start = t('2026-01-01T10:59:59.250Z');
    const end = t('2026-01-01T13:00:00.500Z');
    const slices = splitAtHours(start, end);
    expect(slices.map((s) => new Date(s.periodStart).toISOString())).toEqual([
      '2026-01-01T10:59:59.250Z',
      '2026-01-01T11:00:00.000Z',
      '2026-01-01T12:00:00.000Z',
      '2026-01-01T13:00:00.000Z',
    ]);
    expect(slices.map((s) => s.seconds)).toEqual([0.75, 3600, 3600, 0.5]);
    expect(slices.reduce((sum, s) => sum + s.seconds, 0)).toBe((end - start) / 1000);
    for (const s of slices) expect(hourFloor(s.periodEnd - 1)).toBe(hourFloor(s.periodStart));
  });

  it('ends exactly on a boundary without an empty slice', () => {
    expect(splitAtHours(t('2026-01-01T10:30:00Z'), t('2026-01-01T11:00:00Z'))).toHaveLength(1);
  });

  it('gives nothing for an empty or inverted span, and refuses non-times', () => {
    expect(splitAtHours(5, 5)).toEqual([]);
    expect(splitAtHours(10, 5)).toEqual([]);
    expect(() => splitAtHours(Number.NaN, 5)).toThrow('start must be a finite time');
  });
});

describe('intervalId', () => {
  it('names the container and the hour, so a grown slice keeps its id', () => {
    expect(intervalId('c-1', t('2026-01-01T10:05:00Z'))).toBe('c-1:2026-01-01T10:00:00.000Z');
    expect(intervalId('c-1', t('2026-01-01T10:59:59.999Z'))).toBe(intervalId('c-1', t('2026-01-01T10:00:00Z')));
    expect(intervalId('c-1', t('2026-01-01T11:00:00Z'))).not.toBe(intervalId('c-1', t('2026-01-01T10:00:00Z')));
  });
});

describe('accrual', () => {
  const start = t('2026-01-01T10:40:00Z');

  it('a first checkpoint writes from the start; later ones rewrite only from the last hour reached', () => {
    expect(checkpointSlices(start, null, t('2026-01-01T11:10:00Z')).map((s) => s.seconds)).toEqual([1200, 600]);
    const later = checkpointSlices(start, t('2026-01-01T11:10:00Z'), t('2026-01-01T12:00:05Z'));
    expect(later.map((s) => [new Date(s.periodStart).toISOString(), s.seconds])).toEqual([
      ['2026-01-01T11:00:00.000Z', 3600],
      ['2026-01-01T12:00:00.000Z', 5],
    ]);
  });

  it('a checkpoint before the start (agent clock ahead) writes nothing', () => {
    expect(checkpointSlices(start, null, start - 1000)).toEqual([]);
  });

  it('closed slices are the whole span; a container without both ends has none', () => {
    expect(closedSlices({ startedAt: start, endedAt: start + 2 * HOUR_MS }).map((s) => s.seconds)).toEqual([1200, 3600, 2400]);
    expect(closedSlices({ startedAt: null, endedAt: start })).toEqual([]);
    expect(closedSlices({ startedAt: start, endedAt: null })).toEqual([]);
  });

  it('a lost machine ends usage at its last heartbeat; the earliest end wins in any order', () => {
    const lost = endOfUsage({ kind: 'machine-lost', at: start + 100_000, heartbeatTtlSeconds: 30 });
    expect(lost).toBe(start + 70_000);
    const stopped = endOfUsage({ kind: 'stopped', at: start + 90_000 });
    expect(earliestEnd(earliestEnd(null, lost), stopped)).toBe(earliestEnd(earliestEnd(null, stopped), lost));
    expect(earliestEnd(lost, stopped)).toBe(lost);
  });
});

describe('resources', () => {
  it('converts seconds held into GPU-, CPU-core- and GiB-seconds', () => {
    expect(resourceSeconds(10, { cpuMillicores: 1500, memoryBytes: 2 * 2 ** 30, gpuCount: 2 })).toEqual({
      gpuSeconds: 20,
      cpuCoreSeconds: 15,
      memoryGibSeconds: 20,
    });
  });

  it('overlap of a slice with a query window', () => {
    expect(overlapSeconds(0, 10_000, 5_000, 20_000)).toBe(5);
    expect(overlapSeconds(0, 10_000, 10_000, 20_000)).toBe(0);
    expect(overlapSeconds(0, 10_000, -5, 20_000)).toBe(10);
  });
});

describe('observedStart and observedEnd', () => {
  const bounds = { placedAt: 10_000, storedAt: 50_000 };

  it('keeps a claim inside what the control plane saw', () => {
    expect(observedStart(20_000, bounds)).toBe(20_000);
    expect(observedEnd(40_000, bounds)).toBe(40_000);
  });

  it('moves a start claimed before the placement, or after its event reached NATS, inside', () => {
    expect(observedStart(-30 * 86_400_000, bounds)).toBe(10_000);
    expect(observedStart(90_000, bounds)).toBe(50_000);
  });

  it('ends no later than its event reached NATS and no earlier than the placement', () => {
    expect(observedEnd(86_400_000, bounds)).toBe(50_000);
    expect(observedEnd(0, bounds)).toBe(10_000);
  });
});
