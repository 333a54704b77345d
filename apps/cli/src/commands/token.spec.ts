import { InvalidArgumentError } from 'commander';
import { expiryFrom, expiryText, renderTokens } from './token.js';

const NOW = Date.parse('2026-11-24T00:00:00Z');

describe('tern token --expires', () => {
  it('takes a duration from now', () => {
    expect(expiryFrom('90m', NOW)).toBe('2026-11-24T01:30:00.000Z');
    expect(expiryFrom('12h', NOW)).toBe('2026-11-24T12:00:00.000Z');
    expect(expiryFrom('30d', NOW)).toBe('2026-12-24T00:00:00.000Z');
    expect(expiryFrom('2w', NOW)).toBe('2026-12-08T00:00:00.000Z');
  });

  it('takes a date or a date-time', () => {
    expect(expiryFrom('2027-01-31', NOW)).toBe('2027-01-31T00:00:00.000Z');
    expect(expiryFrom('2027-01-31T12:00:00Z', NOW)).toBe('2027-01-31T12:00:00.000Z');
  });

  it('refuses a past moment, a zero duration and anything else, saying what it takes', () => {
    expect(() => expiryFrom('2020-01-01', NOW)).toThrow('is not in the future');
    expect(() => expiryFrom('0d', NOW)).toThrow('positive duration');
    expect(() => expiryFrom('soon', NOW)).toThrow(InvalidArgumentError);
    expect(() => expiryFrom('30 days', NOW)).toThrow('a duration (90m, 12h, 30d, 8w) or a date');
  });

  it('lists the expiry: never, the moment, or how long ago it expired', () => {
    expect(expiryText(null, NOW)).toBe('never');
    expect(expiryText('2026-12-01T00:00:00.000Z', NOW)).toBe('2026-12-01T00:00:00.000Z');
    expect(expiryText('2026-11-23T22:00:00.000Z', NOW)).toBe('expired 2h ago');
    const text = renderTokens(
      [{ id: 't1', name: 'ci', prefix: 'tern_abc', role: 'member', createdAt: '2026-11-01T00:00:00Z', lastUsedAt: null, expiresAt: null }],
      NOW,
    );
    expect(text.split('\n')[0]).toMatch(/EXPIRES$/);
    expect(text.split('\n')[1]).toMatch(/never$/);
  });
});
