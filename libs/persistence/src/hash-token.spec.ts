import { hashToken } from './hash-token.js';

describe('hashToken', () => {
  it('is the sha256 of the token in lower-case hex', () => {
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('is stable and tells tokens apart', () => {
    expect(hashToken('tern_secret')).toBe(hashToken('tern_secret'));
    expect(hashToken('tern_secret')).not.toBe(hashToken('tern_secreT'));
    expect(hashToken('')).toMatch(/^[0-9a-f]{64}$/);
  });
});
