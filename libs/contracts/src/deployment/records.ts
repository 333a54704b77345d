import type { ResolvedSpec } from './resolved-spec.js';

/**
 * Values kept in NATS KV for the services that act on deployments without reading Postgres
 * (autoscaler, gateway data plane). Postgres stays the source of truth; the gateway writes
 * these after each deploy, stop, start and delete, and rewrites them all at start-up.
 */

/** KV `deployments`, key `<deploymentId>.<version>`: one record per version. */
export interface DeploymentRecord {
  readonly deploymentId: string;
  readonly workspaceId: string;
  readonly name: string;
  readonly version: number;
  /** The version `/endpoint/<name>` serves; older ones only serve `/endpoint/<name>/v<N>`. */
  readonly latest: boolean;
  /** stopped: no containers, requests answered 503 at once. */
  readonly state: 'active' | 'stopped';
  readonly spec: ResolvedSpec;
  readonly updatedAt: string;
}

export function deploymentKey(deploymentId: string, version: number): string {
  return `${deploymentId}.${version}`;
}

/** KV `routes`, key `<containerId>`: a ready container requests can be sent to. Written by the scheduler. */
export interface RouteRecord {
  readonly containerId: string;
  readonly deploymentId: string;
  readonly version: number;
  readonly machineId: string;
  /** Requests it may hold at once: workers × concurrent_requests. */
  readonly capacity: number;
  readonly readyAt: string;
}
