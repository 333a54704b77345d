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
 * A backlog event says requests wait with no container before any load report may say so:
 * count them as buffered (the larger of the two, as they are the same requests).
 */
export function withBacklog(o: Observation, heldRequests: number): Observation {
  return heldRequests > o.buffered ? { ...o, buffered: heldRequests } : o;
}
