import { ticksBetween } from './report.js';

describe('ticksBetween: a group’s CPU over a window', () => {
  it('counts each process at the end less its start; one that ended meanwhile takes nothing away, one that began counts whole', () => {
    const before = { ticks: 1_500, rssKiB: 0, byPid: { 10: 1_000, 11: 500 } };
    // pid 10 (a pooled connection with 1,000 ticks from the joins) closed; 11 spent 20; 12 began and spent 5.
    const after = { ticks: 525, rssKiB: 0, byPid: { 11: 520, 12: 5 } };
    expect(ticksBetween(before, after)).toBe(25);
    expect(ticksBetween(undefined, after)).toBe(525);
  });
});
