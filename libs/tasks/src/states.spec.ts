import { FINAL_TASK_STATES, TASK_STATES, type TaskState } from '#tern/contracts';
import { canMove, isFinal, TASK_TRANSITIONS } from './states.js';

describe('task states', () => {
  it('calls final exactly the states a task ends in', () => {
    expect(TASK_STATES.filter(isFinal)).toEqual(['COMPLETE', 'ERROR', 'CANCELLED', 'EXPIRED', 'TIMEOUT']);
    expect(TASK_STATES.filter((s) => !isFinal(s))).toEqual(['PENDING', 'RUNNING', 'RETRY']);
  });

  it('has a row for every state and names only states', () => {
    expect(Object.keys(TASK_TRANSITIONS).sort()).toEqual([...TASK_STATES].sort());
    for (const to of Object.values(TASK_TRANSITIONS).flat()) expect(TASK_STATES).toContain(to);
  });

  it('never leaves a final state', () => {
    for (const from of FINAL_TASK_STATES) for (const to of TASK_STATES) expect(canMove(from, to)).toBe(false);
  });

  it('lets every open state be cancelled, and end', () => {
    for (const from of TASK_STATES.filter((s) => !isFinal(s))) {
      expect(canMove(from, 'CANCELLED')).toBe(true);
      expect(TASK_TRANSITIONS[from].some(isFinal)).toBe(true);
    }
  });

  it('expires only a task that never started', () => {
    expect(TASK_STATES.filter((s) => canMove(s, 'EXPIRED'))).toEqual(['PENDING']);
  });

  it('completes, retries or times out only an attempt that started (the lease holder reports those)', () => {
    for (const to of ['COMPLETE', 'RETRY', 'TIMEOUT'] as TaskState[])
      expect(TASK_STATES.filter((s) => canMove(s, to))).toEqual(['RUNNING', 'RETRY']);
  });

  it('starts an attempt from any open state, over a running one lost without a word too', () => {
    expect(TASK_STATES.filter((s) => canMove(s, 'RUNNING'))).toEqual(['PENDING', 'RUNNING', 'RETRY']);
  });

  it('ends a task in ERROR from any open state: a last attempt lost before its start was seen', () => {
    expect(TASK_STATES.filter((s) => canMove(s, 'ERROR'))).toEqual(['PENDING', 'RUNNING', 'RETRY']);
  });

  it('never moves back to PENDING', () => {
    expect(TASK_STATES.filter((s) => canMove(s, 'PENDING'))).toEqual([]);
  });
});
