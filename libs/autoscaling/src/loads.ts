import type { ContainerObservation, Observation } from './observation.js';

/** The latest load report of one gateway replica for a version, stamped when it arrived. */
export interface GatewayLoad {
  readonly gatewayId: string;
  readonly inFlight: number;
  readonly buffered: number;
  readonly meanDurationMs: number;
  readonly containers: readonly ContainerObservation[];
  /** Epoch ms, by the autoscaler's clock (gateway clocks may be skewed). */
  readonly receivedAt: number;
}

/** Reports older than this are from a gateway that went away; its requests are gone with it. */
export const LOAD_REPORT_MAX_AGE_MS = 3000;

/**
 * Sums the fresh reports of every gateway into one observation. A container is as busy as all
 * gateways together make it and as idle as the gateway that used it last says; the mean
 * duration is weighted by each gateway's in-flight requests.
 */
export function combineLoads(reports: Iterable<GatewayLoad>, now: number, maxAgeMs = LOAD_REPORT_MAX_AGE_MS): Observation {
  let inFlight = 0;
  let buffered = 0;
  let weighted = 0;
  let weight = 0;
  let durationSum = 0;
  let durations = 0;
  const containers = new Map<string, ContainerObservation>();
  for (const r of reports) {
    if (now - r.receivedAt > maxAgeMs) continue;
    inFlight += r.inFlight;
    buffered += r.buffered;
    if (r.meanDurationMs > 0) {
      weighted += r.meanDurationMs * r.inFlight;
      weight += r.inFlight;
      durationSum += r.meanDurationMs;
      durations++;
    }
    for (const c of r.containers) {
      const seen = containers.get(c.containerId);
      containers.set(
        c.containerId,
        seen
          ? { containerId: c.containerId, inFlight: seen.inFlight + c.inFlight, idleSeconds: Math.min(seen.idleSeconds, c.idleSeconds) }
          : { containerId: c.containerId, inFlight: c.inFlight, idleSeconds: c.idleSeconds },
      );
    }
  }
  const meanDurationMs = weight > 0 ? weighted / weight : durations > 0 ? durationSum / durations : 0;
  return { inFlight, buffered, meanDurationMs, containers: [...containers.values()] };
}

/**
 * A backlog event says requests wait with no container before any load report may say so: the
 * version has at least that many requests. They are the same requests a later report counts,
 * waiting or by then in flight, so only the part of them no report accounts for is added as
 * buffered (adding all of them counted each request that got a container twice for up to 3 s).
 */
export function withBacklog(o: Observation, heldRequests: number): Observation {
  const unaccounted = heldRequests - Math.max(0, o.inFlight);
  return unaccounted > o.buffered ? { ...o, buffered: unaccounted } : o;
}

/** A container's own report of its load, stamped when it arrived (by the autoscaler's clock). */
export interface ServerLoad {
  readonly load: number;
  readonly receivedAt: number;
  /** Epoch ms the container became ready (its route's word), for its idle time when no gateway reports it. */
  readonly readyAt: number;
}

/** The agent reads a container's load every 2 s: a report older than three periods is from a container that stopped answering. */
export const SERVER_LOAD_MAX_AGE_MS = 6000;

/**
 * Sets each ready container's `load` from its latest fresh report; containers without one keep
 * none (the concurrency policy then counts no load for them). A container that reports its load
 * but no gateway does (gateways report a version only once it has had a request, and a restarted
 * one reports nothing until then) is added with no request in flight, idle since it became ready:
 * the caller vouches that it is a ready container of this version.
 */
export function withServerLoads(
  o: Observation,
  loads: ReadonlyMap<string, ServerLoad>,
  now: number,
  maxAgeMs = SERVER_LOAD_MAX_AGE_MS,
): Observation {
  if (loads.size === 0) return o;
  const fresh = [...loads].filter(([, r]) => now - r.receivedAt <= maxAgeMs);
  const byId = new Map(fresh);
  const containers: ContainerObservation[] = o.containers.map((c) => {
    const r = byId.get(c.containerId);
    return r ? { ...c, load: r.load } : c;
  });
  const known = new Set(o.containers.map((c) => c.containerId));
  for (const [containerId, r] of fresh) {
    if (!known.has(containerId))
      containers.push({ containerId, inFlight: 0, idleSeconds: Math.max(0, (now - r.readyAt) / 1000), load: r.load });
  }
  return { ...o, containers };
}
