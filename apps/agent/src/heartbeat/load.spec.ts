import { memoryPercent } from './load.js';

describe('memory use', () => {
  it('counts what is not available, to one decimal, within 0-100', () => {
    expect(memoryPercent({ total: 1000, available: 439 })).toBe(56.1);
    expect(memoryPercent({ total: 1000, available: 1200 })).toBe(0);
    expect(memoryPercent({ total: 0, available: 0 })).toBe(0);
  });
});
