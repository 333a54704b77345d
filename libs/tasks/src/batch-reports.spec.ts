import { batchMsgId } from './batch-reports.js';

describe('batchMsgId', () => {
  const a = { taskId: 't-1', attempt: 1 };
  const b = { taskId: 't-2', attempt: 1 };

  it('is the same for the same members in the same order, and differs for another attempt or member', () => {
    expect(batchMsgId('completed-many', [a, b])).toBe(batchMsgId('completed-many', [{ ...a }, { ...b }]));
    expect(batchMsgId('completed-many', [a, b])).not.toBe(batchMsgId('completed-many', [a, { ...b, attempt: 2 }]));
    expect(batchMsgId('completed-many', [a, b])).not.toBe(batchMsgId('completed-many', [a]));
    expect(batchMsgId('completed-many', [a])).not.toBe(batchMsgId('attempts-ended', [a]));
    // No two member lists run together into the same text.
    expect(batchMsgId('x', [{ taskId: 't-1', attempt: 11 }])).not.toBe(batchMsgId('x', [{ taskId: 't-11', attempt: 1 }]));
  });
});
