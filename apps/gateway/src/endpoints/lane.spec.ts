import { jest } from '@jest/globals';
import type { RouteRecord } from '#tern/contracts';
import { Lane } from './lane.js';

const route = (containerId: string, capacity: number): RouteRecord => ({
  containerId,
  deploymentId: 'd1',
  version: 1,
  machineId: 'm1',
  capacity,
  readyAt: '',
});

describe('Lane', () => {
  let clock = 0;
  const now = () => clock;
  beforeEach(() => (clock = 1_000));

  it('picks the container with the fewest outstanding requests, within capacity', () => {
    const lane = new Lane('d1', 1, 10, now);
    lane.setRoutes([route('a', 2), route('b', 1)]);
    const picks = [lane.tryAcquire(), lane.tryAcquire(), lane.tryAcquire(), lane.tryAcquire()];
    expect(picks.slice(0, 2).sort()).toEqual(['a', 'b']);
    expect(picks[2]).toBe('a');
    expect(picks[3]).toBeUndefined();
    lane.release('b');
    expect(lane.tryAcquire()).toBe('b');
  });

  it('queues when full and hands freed room over in arrival order', async () => {
    const lane = new Lane('d1', 1, 10, now);
    const first = lane.acquire(1000);
    const second = lane.acquire(1000);
    expect(lane.buffered).toBe(2);
    lane.setRoutes([route('a', 1)]);
    await expect(first).resolves.toEqual({ containerId: 'a' });
    expect(lane.buffered).toBe(1);
    lane.release('a', 20);
    await expect(second).resolves.toEqual({ containerId: 'a' });
    expect(lane.takeReport()).toMatchObject({ inFlight: 1, buffered: 0, meanDurationMs: 20 });
  });

  it('refuses beyond the buffer and times waiters out', async () => {
    jest.useFakeTimers();
    try {
      const lane = new Lane('d1', 1, 1, now);
      const waiting = lane.acquire(500);
      expect(lane.acquire(500)).toBe('full');
      jest.advanceTimersByTime(501);
      await expect(waiting).resolves.toEqual({ error: 'timeout' });
      expect(lane.buffered).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  it('gives up a waiter whose client left, at once, and hands room to the next', async () => {
    const lane = new Lane('d1', 1, 2, now);
    const leaving = new AbortController();
    const left = lane.acquire(10_000, leaving.signal);
    const stays = lane.acquire(10_000);
    expect(lane.buffered).toBe(2);
    leaving.abort();
    await expect(left).resolves.toEqual({ error: 'aborted' });
    expect(lane.buffered).toBe(1);
    lane.setRoutes([route('a', 1)]);
    await expect(stays).resolves.toEqual({ containerId: 'a' });
    expect(lane.acquire(10_000, leaving.signal)).toBeInstanceOf(Promise);
    await expect(lane.acquire(10_000, leaving.signal)).resolves.toEqual({ error: 'aborted' });
  });

  it('skips a suspect container until its time is up', () => {
    const lane = new Lane('d1', 1, 10, now);
    lane.setRoutes([route('a', 5), route('b', 5)]);
    lane.markSuspect('a', 3000);
    expect([lane.tryAcquire(), lane.tryAcquire()]).toEqual(['b', 'b']);
    clock += 3001;
    expect(lane.tryAcquire()).toBe('a');
  });

  it('reports idle seconds per container and stays active while anything is there', () => {
    const lane = new Lane('d1', 1, 10, now);
    expect(lane.active).toBe(false);
    lane.setRoutes([route('a', 1)]);
    clock += 4000;
    expect(lane.takeReport().containers).toEqual([{ containerId: 'a', inFlight: 0, idleSeconds: 4 }]);
    lane.setRoutes([]);
    expect(lane.active).toBe(false);
  });
});
