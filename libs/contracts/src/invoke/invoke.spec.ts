import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { InvokeHead, invokeHeadProblems, InvokeResponseHead, invokeResponseHeadProblems } from './invoke.js';

/** The messages class-validator gives for the class's decorators, in the same order. */
function byClassValidator(plain: { status: unknown; headers: unknown }): string[] {
  const errors = validateSync(plainToInstance(InvokeResponseHead, plain), { whitelist: true, forbidNonWhitelisted: true });
  return errors.flatMap((e) => Object.values(e.constraints ?? {}));
}

describe('invokeResponseHeadProblems', () => {
  const cases: { status: unknown; headers: unknown }[] = [
    { status: 200, headers: {} },
    { status: 599, headers: { 'content-type': 'text/plain', 'x-a': '' } },
    { status: 100, headers: { a: 'b' } },
    { status: 99, headers: {} },
    { status: 600, headers: {} },
    { status: 200.5, headers: {} },
    { status: Number.NaN, headers: {} },
    { status: Number('x'), headers: [] },
    { status: 204, headers: null },
    { status: 204, headers: 'text' },
    { status: 204, headers: { a: 1 } },
    { status: 204, headers: { a: ['x'] } },
    { status: 0, headers: { a: null } },
  ];

  it.each(cases)('agrees with the class InvokeResponseHead on %j', (plain) => {
    expect(
      invokeResponseHeadProblems(plain)
        .map((p) => p.message)
        .sort(),
    ).toEqual([...byClassValidator(plain)].sort());
  });
});

describe('invokeHeadProblems', () => {
  const good = { requestId: 'r1', deploymentId: 'd-1', method: 'POST', path: '/x?y=1', headers: { a: 'b' }, timeoutMs: 1000, bodyBytes: 0 };
  const cases: Record<string, unknown>[] = [
    good,
    { ...good, bodyRef: 'r1' },
    { ...good, bodyRef: null },
    { ...good, bodyRef: 5 },
    { ...good, extra: 1 },
    { ...good, requestId: 'a b' },
    { ...good, requestId: 'x'.repeat(65) },
    { ...good, deploymentId: 7 },
    { ...good, method: 'SEARCH' },
    { ...good, method: 'post' },
    { ...good, path: 'x' },
    { ...good, path: 3 },
    { ...good, headers: { a: 1 } },
    { ...good, headers: [] },
    { ...good, timeoutMs: 0 },
    { ...good, timeoutMs: 1.5 },
    { ...good, timeoutMs: '5' },
    { ...good, bodyBytes: -1 },
    {},
  ];

  it.each(cases)('agrees with the class InvokeHead on %j', (plain) => {
    const errors = validateSync(plainToInstance(InvokeHead, plain), { whitelist: true, forbidNonWhitelisted: true });
    const expected = errors.flatMap((e) => Object.values(e.constraints ?? {}));
    expect(
      invokeHeadProblems(plain)
        .map((p) => p.message)
        .sort(),
    ).toEqual(expected.sort());
  });
});
