import { whyRefused } from './task-leases.js';

describe('whyRefused', () => {
  const claim = { taskId: 't-1', attempt: 2, machineId: 'm-2', containerId: 'c-2' };
  const lease = (over: object) => ({ state: 'RUNNING' as const, attempts: 2, machineId: 'm-1', containerId: 'c-1', ...over });

  it.each([
    [undefined, 'unknown-task'],
    [lease({ state: 'COMPLETE' }), 'final'],
    [lease({ attempts: 3 }), 'stale-attempt'],
    [lease({ attempts: 1 }), 'not-yet-leased'],
    [lease({ state: 'PENDING', attempts: 2, machineId: null }), 'not-yet-leased'],
    [lease({}), 'not-lease-holder'],
    [lease({ machineId: 'm-2', containerId: 'c-2' }), 'not-yet-leased'],
    [lease({ machineId: 'm-2', containerId: 'c-9' }), 'not-lease-holder'],
  ])('judges %j as %s', (current, why) => {
    expect(whyRefused(current, claim).why).toBe(why);
  });

  it('names the holder and the claimant', () => {
    expect(whyRefused(lease({}), claim).detail).toBe('attempt 2 of task t-1 is leased to container c-1 on machine m-1, not to c-2 on m-2');
  });
});
