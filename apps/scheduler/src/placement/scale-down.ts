/** A container counted against the desired number: scheduled, starting or running. */
export interface ActiveContainer {
  readonly id: string;
  /** Passed its health check: it may be carrying requests. */
  readonly ready: boolean;
}

/**
 * Which containers to stop to come down to `desired`. Containers not yet ready go first (no
 * request is on them), then those the autoscaler named idle; a busy container is never
 * stopped to meet a lower count. When the deployment is stopped or deleted, all go.
 */
export function containersToStop(active: readonly ActiveContainer[], desired: number, idle: readonly string[], stopAll: boolean): string[] {
  if (stopAll) return active.map((c) => c.id);
  const excess = active.length - desired;
  if (excess <= 0) return [];
  const idleSet = new Set(idle);
  const notReady = active.filter((c) => !c.ready);
  const idleReady = active.filter((c) => c.ready && idleSet.has(c.id));
  return [...notReady, ...idleReady].slice(0, excess).map((c) => c.id);
}
