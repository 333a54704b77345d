import { type Decision, decide } from './decide.js';
import { concurrencyTarget, REPORTED_LOAD_CAP, usableLoad } from './concurrency.js';
import type { ContainerObservation, Observation, ScalingPolicy } from './observation.js';
import { policyFor } from './observation.js';
import { policyTarget } from './policies.js';

const policy: ScalingPolicy = {
  type: 'concurrency',
  minContainers: 0,
  maxContainers: 5,
  tasksPerContainer: 4,
  targetConcurrency: 2,
  keepWarmSeconds: 60,
};
const byLoad: ScalingPolicy = { ...policy, targetLoad: 10 };
const c = (containerId: string, inFlight: number, idleSeconds = 0, load?: number): ContainerObservation => ({
  containerId,
  inFlight,
  idleSeconds,
  ...(load === undefined ? {} : { load }),
});
const obs = (inFlight: number, buffered: number, containers: ContainerObservation[] = []): Observation => ({
  inFlight,
  buffered,
  meanDurationMs: 0,
  containers,
});
const prior = (desired: number): Decision => ({ desired, idleContainers: [], reason: '', changed: true, target: desired, decidedAt: 0 });

describe('concurrency: target_concurrency', () => {
  it.each([
    [0, 0, 0],
    [1, 0, 1],
    [2, 0, 1],
    [3, 0, 2],
    [6, 0, 3],
    [4, 3, 4],
    [0, 1, 1],
  ])('%i in flight + %i waiting at 2 per container → %i', (inFlight, buffered, expected) => {
    expect(concurrencyTarget(policy, obs(inFlight, buffered)).containers).toBe(expected);
  });

  it('falls back to tasks per container without a target, and never divides by less than 1', () => {
    expect(concurrencyTarget({ ...policy, targetConcurrency: undefined }, obs(9, 0)).containers).toBe(3);
    expect(concurrencyTarget({ ...policy, targetConcurrency: 0 }, obs(3, 0)).containers).toBe(3);
    expect(concurrencyTarget({ ...policy, targetConcurrency: 2.7 }, obs(4, 0)).containers).toBe(2);
  });

  it('counts negative counts as nothing', () => {
    expect(concurrencyTarget(policy, obs(-3, -1)).containers).toBe(0);
  });

  it('says why in one line', () => {
    expect(concurrencyTarget(policy, obs(5, 1)).reason).toBe('6 requests / 2 per container → 3');
  });

  it('is the policy policyTarget runs for type concurrency', () => {
    expect(policyTarget(policy, obs(6, 0)).containers).toBe(3);
  });

  it('carries target_concurrency and target_load from the resolved spec', () => {
    const spec = {
      keepWarmSeconds: 60,
      autoscaler: {
        type: 'concurrency' as const,
        minContainers: 1,
        maxContainers: 5,
        tasksPerContainer: 4,
        targetConcurrency: 2,
        targetLoad: 8,
      },
    };
    expect(policyFor(spec, true)).toMatchObject({ targetConcurrency: 2, targetLoad: 8, minContainers: 1 });
    expect(policyFor(spec, false).minContainers).toBe(0);
    expect(policyFor({ ...spec, autoscaler: { ...spec.autoscaler, type: 'queue_depth' } }, true)).not.toHaveProperty('targetConcurrency');
  });
});

describe('concurrency: decide() bounds, idle and keep-warm', () => {
  it('scales 0 → 3 for 6 slow requests at target 2, capped at max', () => {
    expect(decide({ policy, previous: prior(0) }, obs(0, 6), 0)).toMatchObject({ desired: 3, target: 3 });
    const capped = decide({ policy: { ...policy, maxContainers: 2 } }, obs(0, 6), 0);
    expect(capped.desired).toBe(2);
    expect(capped.reason).toMatch(/capped at max_containers 2/);
  });

  it('keeps min_containers with nothing in flight', () => {
    expect(decide({ policy: { ...policy, minContainers: 2 } }, obs(0, 0), 0).desired).toBe(2);
  });

  it('gives back only containers idle past keep-warm, never busy ones', () => {
    const ready = [c('a', 2), c('b', 0, 10), c('c', 0, 120)];
    const d = decide({ policy, previous: prior(3) }, obs(2, 0, ready), 0);
    expect(d).toMatchObject({ desired: 2, idleContainers: ['c'] });
    expect(d.reason).toMatch(/^scale down: 2 requests \/ 2 per container → 1/);
    const warm = decide({ policy, previous: prior(3) }, obs(2, 0, [c('a', 2), c('b', 0, 10), c('c', 0, 30)]), 0);
    expect(warm.desired).toBe(3);
  });

  it('goes to zero once every container is idle past keep-warm', () => {
    const d = decide({ policy, previous: prior(2) }, obs(0, 0, [c('a', 0, 61), c('b', 0, 90)]), 0);
    expect(d).toMatchObject({ desired: 0, idleContainers: ['b', 'a'] });
  });
});

describe('concurrency: server-reported load (target_load)', () => {
  it('asks for ceil(sum of reported loads / target_load) when that is more than the requests ask', () => {
    const t = concurrencyTarget(byLoad, obs(1, 0, [c('a', 1, 0, 25), c('b', 0, 5, 6)]));
    expect(t.containers).toBe(4);
    expect(t.reason).toBe('reported load 31 / 10 per container → 4 (2 of 2 containers reported); 1 requests / 2 per container → 1');
  });

  it('takes the requests ask when it is larger', () => {
    const t = concurrencyTarget(byLoad, obs(6, 0, [c('a', 6, 0, 1)]));
    expect(t.containers).toBe(3);
    expect(t.reason).toMatch(/^6 requests \/ 2 per container → 3; reported load 1/);
  });

  it('counts containers that reported nothing as no load, and still scales from zero on requests', () => {
    expect(concurrencyTarget(byLoad, obs(0, 0, [c('a', 0, 3), c('b', 0, 3, 15)])).containers).toBe(2);
    expect(concurrencyTarget(byLoad, obs(0, 0, [c('a', 0, 3)])).reason).toMatch(/\(0 of 1 containers reported\)/);
    expect(concurrencyTarget(byLoad, obs(0, 3)).containers).toBe(2);
    expect(concurrencyTarget(byLoad, obs(0, 0)).containers).toBe(0);
  });

  it('ignores non-finite and negative reports and caps huge ones', () => {
    const weird = [c('a', 0, 0, Number.NaN), c('b', 0, 0, Number.POSITIVE_INFINITY), c('c', 0, 0, -50), c('d', 0, 0, 12)];
    expect(concurrencyTarget(byLoad, obs(0, 0, weird)).containers).toBe(2);
    expect(usableLoad(Number.MAX_VALUE)).toBe(REPORTED_LOAD_CAP);
    expect(usableLoad(undefined)).toBeUndefined();
    expect(usableLoad(0)).toBe(0);
  });

  it('never takes a server past max_containers, whatever it reports', () => {
    const d = decide({ policy: byLoad }, obs(0, 0, [c('a', 0, 0, 1e12), c('b', 0, 0, 1e12)]), 0);
    expect(d.desired).toBe(5);
    expect(d.reason).toMatch(/reported load 2000000 \/ 10 per container → 200000 .*capped at max_containers 5/);
  });

  it('holds containers busy within keep-warm when the reported load drops to zero', () => {
    const d = decide(
      { policy: byLoad, previous: prior(4) },
      obs(0, 0, [c('a', 0, 5, 0), c('b', 0, 5, 0), c('c', 0, 5, 0), c('d', 0, 5, 0)]),
      0,
    );
    expect(d.desired).toBe(4);
    expect(d.reason).toMatch(/^holding 4/);
  });
});
