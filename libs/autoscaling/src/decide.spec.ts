import { type Decision, decide, decideStopped, idlePastKeepWarm } from './decide.js';
import { ScalingMemory } from './memory.js';
import type { ContainerObservation, Observation, ScalingPolicy } from './observation.js';

const policy: ScalingPolicy = { type: 'queue_depth', minContainers: 0, maxContainers: 10, tasksPerContainer: 30, keepWarmSeconds: 180 };
const c = (containerId: string, inFlight: number, idleSeconds = 0): ContainerObservation => ({ containerId, inFlight, idleSeconds });
const obs = (inFlight: number, buffered: number, containers: ContainerObservation[] = []): Observation => ({
  inFlight,
  buffered,
  meanDurationMs: 0,
  containers,
});
const prior = (desired: number, idleContainers: string[] = []): Decision => ({
  desired,
  idleContainers,
  reason: '',
  changed: true,
  target: desired,
  decidedAt: 0,
});

/**
 * A toy cluster: the scheduler starts containers up to desired at once and stops listed idle
 * ones down to it; load is spread 30 per container, the rest buffered; idle time grows by the tick.
 */
function simulate(p: ScalingPolicy, loads: number[], tickSeconds = 1) {
  let containers: { id: string; idle: number; inFlight: number }[] = [];
  let previous: Decision | undefined;
  let next = 0;
  const history: Decision[] = [];
  loads.forEach((load, tick) => {
    let left = load;
    for (const k of containers) {
      k.inFlight = Math.min(p.tasksPerContainer, left);
      left -= k.inFlight;
      k.idle = k.inFlight > 0 ? 0 : k.idle + tickSeconds;
    }
    const o = obs(
      load - left,
      left,
      containers.map((k) => c(k.id, k.inFlight, k.idle)),
    );
    const d = decide({ policy: p, previous }, o, tick * 1000);
    history.push(d);
    previous = d;
    while (containers.length < d.desired) containers.push({ id: `c${next++}`, idle: 0, inFlight: 0 });
    for (const id of d.idleContainers) {
      if (containers.length <= d.desired) break;
      containers = containers.filter((k) => k.id !== id);
    }
  });
  return { history, containers: () => containers.length };
}

describe('decide: scaling up', () => {
  it('adds a second container for the 31st request with 30 per container', () => {
    const d = decide({ policy, previous: prior(1) }, obs(30, 1, [c('a', 30)]), 0);
    expect(d).toMatchObject({ desired: 2, idleContainers: [], changed: true });
    expect(d.reason).toMatch(/^scale up: load 31 \/ 30 per container → 2/);
  });

  it('keeps one container for 30 requests', () => {
    expect(decide({ policy, previous: prior(1) }, obs(30, 0, [c('a', 30)]), 0)).toMatchObject({ desired: 1, changed: false });
  });

  it('scales from zero at once: buffered requests with no container → 1', () => {
    expect(decide({ policy, previous: prior(0) }, obs(0, 1), 0)).toMatchObject({ desired: 1, changed: true });
  });

  it('scales from zero on the first decision too', () => {
    expect(decide({ policy }, obs(0, 4), 0).desired).toBe(1);
  });

  it('lets max win: 1000 requests with max 3 → 3', () => {
    const d = decide({ policy: { ...policy, maxContainers: 3 } }, obs(0, 1000), 0);
    expect(d.desired).toBe(3);
    expect(d.reason).toContain('capped at max_containers 3');
  });

  it('lets max win over min', () => {
    expect(decide({ policy: { ...policy, minContainers: 4, maxContainers: 2 } }, obs(0, 0), 0).desired).toBe(2);
  });

  it('honours min with no traffic (a warm pool)', () => {
    const d = decide({ policy: { ...policy, minContainers: 2 } }, obs(0, 0), 0);
    expect(d.desired).toBe(2);
    expect(d.reason).toContain('min_containers 2');
  });
});

describe('decide: scaling down', () => {
  it('keeps containers idle for less than keep-warm', () => {
    const d = decide({ policy, previous: prior(2) }, obs(0, 0, [c('a', 0, 179), c('b', 0, 180)]), 0);
    expect(d).toMatchObject({ desired: 2, idleContainers: [], changed: false });
    expect(d.reason).toMatch(/^holding 2/);
  });

  it('drops only by the containers idle past keep-warm, and lists them oldest idle first', () => {
    const d = decide({ policy, previous: prior(3) }, obs(0, 0, [c('a', 0, 181), c('b', 0, 10), c('c', 0, 500)]), 0);
    expect(d).toMatchObject({ desired: 1, idleContainers: ['c', 'a'], changed: true });
    expect(d.reason).toMatch(/^scale down/);
  });

  it('scales to zero when everything is idle past keep-warm', () => {
    expect(decide({ policy, previous: prior(2) }, obs(0, 0, [c('a', 0, 200), c('b', 0, 300)]), 0)).toMatchObject({
      desired: 0,
      idleContainers: ['b', 'a'],
    });
  });

  it('never goes below the busy containers', () => {
    // The scheduler runs more than desired (e.g. a restarted scheduler): all 3 are serving.
    const d = decide({ policy, previous: prior(1) }, obs(3, 0, [c('a', 1), c('b', 1), c('c', 1)]), 0);
    expect(d.desired).toBe(1);
    const down = decide({ policy, previous: prior(3) }, obs(3, 0, [c('a', 1), c('b', 1), c('c', 1)]), 0);
    expect(down.desired).toBe(3);
  });

  it('never goes below min, even with every container idle', () => {
    const d = decide({ policy: { ...policy, minContainers: 1 }, previous: prior(2) }, obs(0, 0, [c('a', 0, 900), c('b', 0, 800)]), 0);
    expect(d).toMatchObject({ desired: 1, idleContainers: ['a', 'b'] });
  });

  it('gives back slots that are not ready yet at once (nothing warm to lose)', () => {
    // Asked for 3 when 70 were waiting; only one is ready, and the load has gone.
    expect(decide({ policy, previous: prior(3) }, obs(0, 0, [c('a', 0, 1)]), 0).desired).toBe(1);
  });

  it('starts from the ready containers when there is no previous decision (restart keeps them warm)', () => {
    expect(decide({ policy }, obs(0, 0, [c('a', 0, 5), c('b', 0, 5)]), 0)).toMatchObject({ desired: 2, changed: true });
  });

  it('caps a restart baseline above max at max', () => {
    expect(decide({ policy: { ...policy, maxContainers: 1 } }, obs(0, 0, [c('a', 0, 5), c('b', 0, 5)]), 0).desired).toBe(1);
  });

  it('reports a change when only the idle list changes', () => {
    const first = decide({ policy: { ...policy, minContainers: 1 }, previous: prior(1) }, obs(0, 0, [c('a', 0, 100)]), 0);
    expect(first.changed).toBe(false);
    const later = decide({ policy: { ...policy, minContainers: 1 }, previous: first }, obs(0, 0, [c('a', 0, 200)]), 0);
    expect(later).toMatchObject({ desired: 1, idleContainers: ['a'], changed: true });
  });
});

describe('decide: over time', () => {
  it('does not flap under a steady load that wobbles around a container boundary', () => {
    const wobble = Array.from({ length: 600 }, (_, i) => (i % 2 ? 28 : 33));
    const { history, containers } = simulate(policy, wobble);
    expect(history.map((d) => d.desired).slice(1)).toEqual(Array(599).fill(2));
    expect(history.filter((d) => d.changed)).toHaveLength(1);
    expect(containers()).toBe(2);
  });

  it('does not change anything under a constant load', () => {
    const { history } = simulate(policy, Array(300).fill(45));
    expect(history.filter((d) => d.changed).map((d) => d.desired)).toEqual([2]);
  });

  it('goes back to zero only after keep-warm once a burst is over', () => {
    const p = { ...policy, keepWarmSeconds: 10 };
    const loads = [0, 90, 90, 90, ...Array(20).fill(0)];
    const { history, containers } = simulate(p, loads);
    const desired = history.map((d) => d.desired);
    expect(desired.slice(0, 2)).toEqual([0, 3]);
    // Last busy at tick 3 (idle 0), idle past 10 s from tick 14 on.
    expect(desired.slice(3, 14)).toEqual(Array(11).fill(3));
    expect(desired[14]).toBe(0);
    expect(history[14].idleContainers).toHaveLength(3);
    expect(containers()).toBe(0);
  });

  it('comes back at once when load returns during keep-warm', () => {
    const p = { ...policy, keepWarmSeconds: 10 };
    const { history } = simulate(p, [60, 0, 0, 0, 0, 90]);
    expect(history.map((d) => d.desired)).toEqual([2, 2, 2, 2, 2, 3]);
  });
});

describe('decideStopped', () => {
  it('asks for zero and lists every container not serving, oldest idle first', () => {
    const d = decideStopped(prior(3), obs(1, 0, [c('a', 0, 1), c('b', 1), c('c', 0, 9)]), 'deployment stopped', 0);
    expect(d).toMatchObject({ desired: 0, idleContainers: ['c', 'a'], reason: 'deployment stopped', changed: true });
  });

  it('reports no change once nothing is left', () => {
    const first = decideStopped(undefined, obs(0, 0), 'deployment removed', 0);
    expect(decideStopped(first, obs(0, 0), 'deployment removed', 1).changed).toBe(false);
  });
});

describe('idlePastKeepWarm', () => {
  it('needs strictly longer than keep-warm and no request inside', () => {
    expect(idlePastKeepWarm([c('a', 0, 10), c('b', 0, 10.5), c('c', 1, 99)], 10).map((k) => k.containerId)).toEqual(['b']);
  });
});

describe('decide: with a memory (as the autoscaler keeps one per version)', () => {
  const p = { ...policy, keepWarmSeconds: 10 };

  it('keeps slots still starting until the target has been low for keep-warm, then gives them back', () => {
    const memory = new ScalingMemory();
    let d = decide({ policy: p, memory }, obs(0, 90), 0);
    expect(d.desired).toBe(3);
    // The load is gone before any container is ready: held for keep-warm, not cancelled and asked again.
    for (let s = 1; s <= 10; s++) {
      d = decide({ policy: p, previous: d, memory }, obs(0, 0), s * 1000);
      expect(d.desired).toBe(3);
    }
    d = decide({ policy: p, previous: d, memory }, obs(0, 0), 11_000);
    expect(d).toMatchObject({ desired: 0, changed: true });
  });

  it('does not flap a starting slot when the target wobbles across a container boundary', () => {
    const memory = new ScalingMemory();
    let d = decide({ policy: p, memory }, obs(30, 0, [c('a', 30)]), 0);
    const desired: number[] = [];
    for (let s = 1; s <= 60; s++) {
      d = decide({ policy: p, previous: d, memory }, s % 2 ? obs(30, 1, [c('a', 30)]) : obs(29, 0, [c('a', 29)]), s * 1000);
      desired.push(d.desired);
    }
    expect(desired).toEqual(Array(60).fill(2));
  });

  it('gives up an idle container only once the target has been low for keep-warm as well', () => {
    const memory = new ScalingMemory();
    const held = decide({ policy: p, previous: prior(2), memory }, obs(0, 0, [c('a', 0, 50), c('b', 0, 50)]), 0);
    expect(held.desired).toBe(2);
    expect(decide({ policy: p, previous: held, memory }, obs(0, 0, [c('a', 0, 60), c('b', 0, 60)]), 10_000).desired).toBe(0);
  });

  it('keeps the wobble and burst behaviour of the rule without memory', () => {
    const wobble = Array.from({ length: 300 }, (_, i) => (i % 2 ? 28 : 33));
    const memory = new ScalingMemory();
    let previous: Decision | undefined;
    const changes = wobble.filter((load, tick) => {
      const ready = [c('a', Math.min(30, load)), c('b', Math.max(0, load - 30))];
      previous = decide({ policy, previous, memory }, obs(load, 0, tick ? ready : []), tick * 1000);
      return previous.changed;
    });
    expect(changes).toHaveLength(1);
  });
});
