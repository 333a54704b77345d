import { jest } from '@jest/globals';
import { register } from 'prom-client';
import { EndedEarly, RequestLimits } from './request-limits.js';

async function endedCount(deployment: string, reason: string): Promise<number> {
  const metric = await register.getSingleMetric('tern_endpoint_requests_ended_early_total')!.get();
  return metric.values.find((v) => v.labels.deployment === deployment && v.labels.reason === reason)?.value ?? 0;
}

describe('RequestLimits', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('ends a request whose response has not started by its timeout, and not one whose has', async () => {
    const late = new RequestLimits('late', 5_000);
    late.untilStart(Date.now() + 1_000, 'no response started within 1 s');
    jest.advanceTimersByTime(999);
    expect(late.signal.aborted).toBe(false);
    jest.advanceTimersByTime(1);
    expect(late.signal.reason).toBeInstanceOf(EndedEarly);
    expect(late.signal.reason).toMatchObject({ reason: 'timeout', code: 504, message: 'no response started within 1 s' });
    expect(await endedCount('late', 'timeout')).toBe(1);

    const started = new RequestLimits('started', 5_000);
    started.untilStart(Date.now() + 1_000, 'no response started within 1 s');
    started.started();
    jest.advanceTimersByTime(10_000);
    expect(started.signal.aborted).toBe(false);
  });

  it('counts only silence between pieces against idle_timeout, not time between them spent elsewhere', () => {
    const limits = new RequestLimits('idle', 1_000);
    for (let i = 0; i < 5; i++) {
      limits.waiting();
      jest.advanceTimersByTime(900);
      limits.heard();
      // A slow client: the piece waits to be written, which is not the container's silence.
      jest.advanceTimersByTime(5_000);
    }
    expect(limits.signal.aborted).toBe(false);
    limits.waiting();
    jest.advanceTimersByTime(1_000);
    expect(limits.ended).toMatchObject({
      reason: 'idle_timeout',
      message: "the response sent nothing for 1 s (the deployment's idle_timeout)",
    });
  });

  it('ends at max_duration however lively the stream, and keeps the first reason and count', async () => {
    const limits = new RequestLimits('total', 1_000);
    limits.inAll(Date.now() + 3_000, 'passed 3 s in all');
    for (let t = 0; t < 3_000; t += 500) {
      limits.waiting();
      jest.advanceTimersByTime(500);
      limits.heard();
    }
    expect(limits.ended).toMatchObject({ reason: 'max_duration', message: 'passed 3 s in all' });
    limits.end('client_closed', 499, 'the client closed the connection');
    expect(limits.ended?.reason).toBe('max_duration');
    expect(await endedCount('total', 'max_duration')).toBe(1);
    expect(await endedCount('total', 'client_closed')).toBe(0);
  });

  it('fires nothing once cleared', () => {
    const limits = new RequestLimits('cleared', 1_000);
    limits.untilStart(Date.now() + 1_000, 'x');
    limits.inAll(Date.now() + 2_000, 'y');
    limits.waiting();
    limits.clear();
    jest.advanceTimersByTime(60_000);
    expect(limits.signal.aborted).toBe(false);
  });
});
