import { parseKeys } from './keys.js';

describe('dashboard keys', () => {
  it('reads arrows (both encodings), l, Enter, Esc, q and Ctrl-C', () => {
    expect(parseKeys('\x1b[A\x1b[B\x1bOA\x1bOB')).toEqual(['up', 'down', 'up', 'down']);
    expect(parseKeys('l')).toEqual(['logs']);
    expect(parseKeys('\r')).toEqual(['logs']);
    expect(parseKeys('\x1b')).toEqual(['back']);
    expect(parseKeys('q')).toEqual(['quit']);
    expect(parseKeys('\x03')).toEqual(['quit']);
  });

  it('ignores other keys and whole unknown escape sequences', () => {
    expect(parseKeys('x\x1b[C\x1b[15~z')).toEqual([]);
    expect(parseKeys('\x1b[1;5Aj')).toEqual(['down']);
  });
});
