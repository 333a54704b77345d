import type { Observation, ScalingPolicy } from './observation.js';
import { clamp, policyTarget, queueDepthTarget, requestLatencyTarget } from './policies.js';
import { demand, policyFor } from './observation.js';

const queue: ScalingPolicy = { type: 'queue_depth', minContainers: 0, maxContainers: 10, tasksPerContainer: 30, keepWarmSeconds: 180 };
const latency: ScalingPolicy = { ...queue, type: 'request_latency', desiredLatencySeconds: 30 };
const load = (inFlight: number, buffered = 0, meanDurationMs = 0): Observation => ({ inFlight, buffered, meanDurationMs, containers: [] });

describe('queue_depth', () => {
  it.each([
    [0, 0, 0],
    [1, 0, 1],
    [30, 0, 1],
    [31, 0, 2],
    [20, 11, 2],
    [0, 1, 1],
    [60, 0, 2],
    [61, 0, 3],
  ])('%i in flight + %i buffered with 30 per container → %i', (inFlight, buffered, expected) => {
    expect(queueDepthTarget(queue, load(inFlight, buffered)).containers).toBe(expected);
  });

  it('treats a tasks-per-container below 1 as 1 (never divides by zero)', () => {
    expect(queueDepthTarget({ ...queue, tasksPerContainer: 0 }, load(3)).containers).toBe(3);
  });

  it('counts negative inputs as nothing', () => {
    expect(demand(load(-4, -1))).toBe(0);
  });
});

describe('request_latency', () => {
  it('scales to keep (mean duration × requests) under the desired latency (Beam: 3 × 60 s / 30 s → 3, not 6)', () => {
    expect(requestLatencyTarget(latency, load(0, 3, 60_000)).containers).toBe(3);
  });

  it('needs one container while the work fits in the desired latency', () => {
    expect(requestLatencyTarget(latency, load(5, 0, 2000)).containers).toBe(1);
  });

  it('rounds up: 10 s × 7 / 30 s → 3', () => {
    expect(requestLatencyTarget(latency, load(4, 3, 10_000)).containers).toBe(3);
  });

  it('asks for nothing with no requests', () => {
    expect(requestLatencyTarget(latency, load(0, 0, 60_000)).containers).toBe(0);
  });

  it('asks for one container per request before any duration is measured (scale from zero)', () => {
    expect(requestLatencyTarget(latency, load(0, 2, 0)).containers).toBe(2);
  });
});

describe('clamp', () => {
  it('honours min and max', () => {
    expect(clamp({ ...queue, minContainers: 2 }, 0)).toBe(2);
    expect(clamp({ ...queue, maxContainers: 3 }, 9)).toBe(3);
    expect(clamp(queue, 4)).toBe(4);
  });

  it('lets max win over min', () => {
    expect(clamp({ ...queue, minContainers: 5, maxContainers: 2 }, 0)).toBe(2);
  });
});

describe('policyFor', () => {
  const spec = {
    keepWarmSeconds: 60,
    autoscaler: { type: 'queue_depth' as const, minContainers: 2, maxContainers: 4, tasksPerContainer: 8 },
  };

  it('keeps min_containers for the latest version', () => {
    expect(policyFor(spec, true)).toMatchObject({ minContainers: 2, maxContainers: 4, tasksPerContainer: 8, keepWarmSeconds: 60 });
  });

  it('lets older versions go to zero', () => {
    expect(policyFor(spec, false).minContainers).toBe(0);
  });
});

describe('the issue examples', () => {
  it('queue_depth: with 30 per container the 31st task adds a second container', () => {
    expect(queueDepthTarget(queue, load(30)).containers).toBe(1);
    expect(queueDepthTarget(queue, load(30, 1)).containers).toBe(2);
  });

  it('request_latency: 3 one-minute tasks, desired_latency 30 s, max 5 → 3 containers', () => {
    const p: ScalingPolicy = { ...latency, maxContainers: 5 };
    expect(clamp(p, requestLatencyTarget(p, load(0, 3, 60_000)).containers)).toBe(3);
  });

  it.each(['queue_depth', 'request_latency', 'predictive'] as const)('%s: max always wins, over the load and over min', (type) => {
    const p: ScalingPolicy = { ...latency, type, minContainers: 9, maxContainers: 4 };
    expect(clamp(p, policyTarget(p, load(500, 500, 10_000)).containers)).toBe(4);
    expect(clamp(p, policyTarget(p, load(0, 0)).containers)).toBe(4);
  });
});

describe('policyFor: predictive', () => {
  it('passes the predictive knobs through', () => {
    const spec = {
      keepWarmSeconds: 10,
      autoscaler: {
        type: 'predictive' as const,
        minContainers: 1,
        maxContainers: 4,
        tasksPerContainer: 2,
        desiredLatencySeconds: 5,
        targetUtilization: 0.7,
        stableWindowSeconds: 90,
        panicWindowSeconds: 9,
        prewarm: false,
      },
    };
    expect(policyFor(spec, true)).toEqual({ ...spec.autoscaler, keepWarmSeconds: 10 });
  });
});
