import { resultBytesForComparison } from './task-spot-check.js';

describe('resultBytesForComparison', () => {
  it('compares a result kept inline as the gateway keeps it: its JSON re-serialised', () => {
    const gatewayKeeps = (raw: string) => Buffer.from(JSON.stringify(JSON.parse(raw) as unknown));
    for (const raw of ['{"a": 1, "b": [1, 2]}', 'null', '"text"', '{"n":1.50}'])
      expect(resultBytesForComparison(Buffer.from(raw), 1024)).toEqual(gatewayKeeps(raw));
    expect(resultBytesForComparison(Buffer.from('{"a": 1}'), 1024)).not.toEqual(resultBytesForComparison(Buffer.from('{"a": 2}'), 1024));
  });

  it('compares a larger result as the bytes stored, and refuses output that is not JSON', () => {
    const big = Buffer.from(`{"a":   ${'1'.repeat(40)}}`);
    expect(resultBytesForComparison(big, 16)).toBe(big);
    expect(() => resultBytesForComparison(Buffer.from('not json'), 1024)).toThrow();
  });
});
