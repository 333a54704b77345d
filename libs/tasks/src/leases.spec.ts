import {
  holdsOpenLease,
  lostBeforeStart,
  ORDINARY_REFUSALS,
  refusedForPlacement,
  TASK_ACK_WAIT_MS,
  TASK_PROGRESS_EVERY_MS,
  whyRefused,
} from './leases.js';

describe('task leases', () => {
  const claim = { taskId: 't-1', attempt: 2, machineId: 'm-2', containerId: 'c-2' };
  const lease = (over: object = {}) => ({ state: 'RUNNING' as const, attempts: 2, machineId: 'm-1', containerId: 'c-1', ...over });

  describe('whyRefused', () => {
    it.each([
      [undefined, 'unknown-task'],
      [lease({ state: 'COMPLETE' }), 'final'],
      [lease({ state: 'EXPIRED', attempts: 0, machineId: null }), 'final'],
      [lease({ attempts: 3 }), 'stale-attempt'],
      [lease({ attempts: 1 }), 'not-yet-leased'],
      [lease({ state: 'PENDING', attempts: 2, machineId: null }), 'not-yet-leased'],
      [lease(), 'not-lease-holder'],
      [lease({ machineId: 'm-2', containerId: 'c-2' }), 'not-yet-leased'],
      [lease({ machineId: 'm-2', containerId: 'c-9' }), 'not-lease-holder'],
    ])('judges %j as %s', (current, why) => {
      expect(whyRefused(current, claim).why).toBe(why);
    });

    it('takes a claim with no container for one with a null container', () => {
      expect(whyRefused(lease({ machineId: 'm-2', containerId: null }), { ...claim, containerId: undefined }).why).toBe('not-yet-leased');
    });

    it('names the holder and the claimant', () => {
      expect(whyRefused(lease(), claim).detail).toBe('attempt 2 of task t-1 is leased to container c-1 on machine m-1, not to c-2 on m-2');
    });
  });

  it('counts only refusals of a machine speaking for what it does not hold', () => {
    expect([...ORDINARY_REFUSALS].sort()).toEqual(['final', 'stale-attempt']);
  });

  it('blames the placement for a refused start of an open task on an earlier attempt only', () => {
    expect(refusedForPlacement(lease({ attempts: 1 }), 2)).toBe(true);
    expect(refusedForPlacement(lease({ attempts: 2 }), 2)).toBe(false);
    expect(refusedForPlacement(lease({ attempts: 1, state: 'CANCELLED' }), 2)).toBe(false);
    expect(refusedForPlacement(undefined, 1)).toBe(false);
  });

  it('takes a start over the running attempt just before, on a known machine, for the loss of that attempt', () => {
    const before = { was: 'RUNNING' as const, wasAttempt: 1, wasMachine: 'm-1' };
    expect(lostBeforeStart(before, 2)).toBe(true);
    expect(lostBeforeStart({ ...before, was: 'RETRY' }, 2)).toBe(false);
    expect(lostBeforeStart(before, 3)).toBe(false);
    expect(lostBeforeStart({ ...before, wasMachine: null }, 2)).toBe(false);
  });

  it("lets only the holder of an open attempt's lease store its result", () => {
    expect(holdsOpenLease(lease(), 'm-1', 2)).toBe(true);
    expect(holdsOpenLease(lease(), 'm-2', 2)).toBe(false);
    expect(holdsOpenLease(lease(), 'm-1', 1)).toBe(false);
    expect(holdsOpenLease(lease({ state: 'COMPLETE' }), 'm-1', 2)).toBe(false);
  });

  it('signals progress three times per ack wait', () => {
    expect(TASK_PROGRESS_EVERY_MS * 3).toBeLessThanOrEqual(TASK_ACK_WAIT_MS);
    expect(TASK_PROGRESS_EVERY_MS).toBe(10_000);
  });
});
