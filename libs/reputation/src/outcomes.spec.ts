import { addAt, valueAt } from './decay.js';
import { type OutcomeBook, outcomeRates, recordOutcome, startFailureOutcome, taskFailureOutcome } from './outcomes.js';
import { DAY_MS, DEFAULT_PARAMS as P, neutral } from './params.js';

const now = Date.parse('2026-03-01T00:00:00Z');

function book(entries: [deployment: string, successes: number, shared: number, machine?: number][], at = now): OutcomeBook {
  const b: OutcomeBook = {};
  for (const [d, ok, shared, machine = 0] of entries) {
    for (let i = 0; i < ok; i++) recordOutcome(b, d, 'success', at, P);
    for (let i = 0; i < shared; i++) recordOutcome(b, d, 'shared', at, P);
    for (let i = 0; i < machine; i++) recordOutcome(b, d, 'machine', at, P);
  }
  return b;
}

describe('decayed counts', () => {
  it('halve every half-life and take late events at their own weight', () => {
    const c = addAt(undefined, 8, now, P.halfLifeMs);
    expect(valueAt(c, now + P.halfLifeMs, P.halfLifeMs)).toBeCloseTo(4);
    expect(valueAt(c, now + 3 * P.halfLifeMs, P.halfLifeMs)).toBeCloseTo(1);
    const late = addAt(c, 2, now - P.halfLifeMs, P.halfLifeMs);
    expect(late.v).toBeCloseTo(9);
  });
});

describe('outcomeRates', () => {
  it('a new machine is neither 0 nor 1', () => {
    const rates = outcomeRates(new Map([['m-new', {}]]), now, P);
    expect(rates.get('m-new')!.rate).toBeCloseTo(neutral(P));
    expect(rates.get('m-new')!.rate).toBeGreaterThan(0);
    expect(rates.get('m-new')!.rate).toBeLessThan(1);
    // One success or one failure moves it a little, not to an extreme.
    const one = outcomeRates(
      new Map([
        ['m-ok', book([['d', 1, 0]])],
        ['m-bad', book([['e', 0, 0, 1]])],
      ]),
      now,
      P,
    );
    expect(one.get('m-ok')!.rate).toBeLessThan(1);
    expect(one.get('m-bad')!.rate).toBeGreaterThan(0.5);
  });

  it('excess failures on one machine lower only that machine', () => {
    // Deployment d fails half its tasks on m-bad and none on m-good.
    const rates = outcomeRates(
      new Map([
        ['m-good', book([['d', 10, 0]])],
        ['m-bad', book([['d', 5, 5]])],
      ]),
      now,
      P,
    );
    const good = rates.get('m-good')!;
    const bad = rates.get('m-bad')!;
    expect(good.faults).toBe(0);
    expect(good.rate).toBeCloseTo((10 + P.prior.alpha) / (10 + P.prior.alpha + P.prior.beta));
    expect(bad.faults).toBeGreaterThan(4);
    expect(bad.rate).toBeLessThan(0.75);
    expect(bad.rate).toBeLessThan(good.rate - 0.15);
  });

  it('a handler that fails everywhere alike charges no machine', () => {
    const rates = outcomeRates(
      new Map([
        ['m-1', book([['d', 5, 5]])],
        ['m-2', book([['d', 5, 5]])],
      ]),
      now,
      P,
    );
    expect(rates.get('m-1')!.faults).toBeCloseTo(0);
    expect(rates.get('m-1')!.rate).toBeCloseTo(rates.get('m-2')!.rate);
    expect(rates.get('m-1')!.rate).toBeGreaterThan(0.9);
  });

  it('a handler seen on one machine only gets the benefit of the doubt, but machine faults count in full', () => {
    const rates = outcomeRates(
      new Map([
        ['m-1', book([['d', 5, 5]])],
        ['m-2', book([['e', 5, 0, 5]])],
      ]),
      now,
      P,
    );
    expect(rates.get('m-1')!.faults).toBeCloseTo(0);
    expect(rates.get('m-2')!.faults).toBeCloseTo(5);
    expect(rates.get('m-2')!.rate).toBeCloseTo((10 - 5 + P.prior.alpha) / (10 + P.prior.alpha + P.prior.beta));
  });

  it('old failures fade', () => {
    const old = book([['d', 0, 0, 10]], now - 14 * DAY_MS);
    const recent = book([['d', 0, 0, 10]], now);
    const rates = outcomeRates(
      new Map([
        ['m-old', old],
        ['m-recent', recent],
      ]),
      now,
      P,
    );
    // Four half-lives: ten failures weigh 0.625 of one, against the prior's two pseudo-counts.
    expect(rates.get('m-old')!.rate).toBeGreaterThan(0.65);
    expect(rates.get('m-recent')!.rate).toBeLessThan(0.2);
    // Successes after the failures lift it further.
    recordOutcome(old, 'd', 'success', now, P);
    recordOutcome(old, 'd', 'success', now, P);
    expect(outcomeRates(new Map([['m-old', old]]), now, P).get('m-old')!.rate).toBeGreaterThan(rates.get('m-old')!.rate);
  });
});

describe('whose fault a failure is', () => {
  it("shares handler errors and failed starts; timeouts, lost containers and lost machines are the machine's", () => {
    expect(taskFailureOutcome('error')).toBe('shared');
    expect(taskFailureOutcome('timeout')).toBe('machine');
    expect(taskFailureOutcome('container-lost')).toBe('machine');
    expect(['image', 'create', 'start', 'health', 'runtime'].map(startFailureOutcome)).toEqual(Array(5).fill('shared'));
    expect(startFailureOutcome('machine-lost')).toBe('machine');
  });
});
