import { decodeCursor, encodeCursor } from './task-views.js';

describe('task list cursor', () => {
  it('round-trips (created_at, id) and refuses what it did not make', () => {
    const row = { createdAt: new Date('2026-11-22T06:00:00.123Z'), id: '8623e0da-d37f-4cfb-8d8e-a0f0207b9190' };
    expect(decodeCursor(encodeCursor(row))).toEqual({ createdAt: '2026-11-22T06:00:00.123Z', id: row.id });
    expect(decodeCursor('garbage')).toBeUndefined();
  });
});
