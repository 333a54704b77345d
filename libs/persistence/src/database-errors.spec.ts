import { QueryFailedError } from 'typeorm';
import { badInputOf, isUniqueViolation } from './database-errors.js';

const failure = (code: string, message = 'boom') =>
  new QueryFailedError('SELECT 1', [], Object.assign(new Error(message), { code, constraint: 'uq_x' }));

describe('database errors', () => {
  it('says what was wrong with the input for the SQLSTATEs of a refused value', () => {
    expect(badInputOf(failure('22P02', 'invalid input syntax for type uuid: "x"'))).toBe(
      'the request holds invalid text for its type (invalid input syntax for type uuid: "x"); fix that value',
    );
    for (const code of ['22021', '22P05', '22001', '22003', '22007', '22008'])
      expect(badInputOf(failure(code))).toMatch(/^the request holds/);
  });

  it('leaves every other failure a server error', () => {
    for (const code of ['23505', '42P01', '40001', '57014', '22012']) expect(badInputOf(failure(code))).toBeUndefined();
    expect(badInputOf(new Error('connection refused'))).toBeUndefined();
  });

  it('recognises a unique violation, optionally by constraint', () => {
    expect(isUniqueViolation(failure('23505'))).toBe(true);
    expect(isUniqueViolation(failure('23505'), 'uq_x')).toBe(true);
    expect(isUniqueViolation(failure('23505'), 'uq_y')).toBe(false);
  });
});
