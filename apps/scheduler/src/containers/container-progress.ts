import {
  type ContainerEvent,
  type ContainerFailed,
  type ContainerReady,
  type ContainerResources as ResourcesPayload,
  type ContainerScheduled,
  type ContainerStarted,
  type ContainerState,
  type ContainerStopped,
} from '#tern/contracts';
import { type ContainerProgressColumns, type ContainerResources } from '#tern/persistence';

/**
 * What one lifecycle event says about a container's row. Pure, so the ordering rules are
 * tested without a database: states only move forward (an event delivered late or twice
 * never drags a container back), timestamps keep the earliest value seen.
 */
export type LifecycleEvent =
  | { kind: 'scheduled'; event: ContainerScheduled }
  | { kind: 'starting'; event: ContainerEvent }
  | { kind: 'started'; event: ContainerStarted }
  | { kind: 'ready'; event: ContainerReady }
  | { kind: 'stopped'; event: ContainerStopped }
  | { kind: 'failed'; event: ContainerFailed };

/** What one lifecycle event says about a container's row; its reason replaces the row's when the state moves forward (null clears it). */
export type ContainerProgress = ContainerProgressColumns;

/**
 * The order states are reached in. failed is last: a container that failed after it had
 * started is also reported stopped, in either order, and the row should end up saying failed.
 */
export const CONTAINER_STATE_ORDER: readonly ContainerState[] = [
  'pending',
  'scheduled',
  'starting',
  'running',
  'stopping',
  'stopped',
  'failed',
];

export function isForward(from: ContainerState, to: ContainerState): boolean {
  return CONTAINER_STATE_ORDER.indexOf(to) > CONTAINER_STATE_ORDER.indexOf(from);
}

function requested(r: ResourcesPayload): ContainerResources {
  return { cpuMillicores: r.cpuMillicores, memoryBytes: r.memoryBytes, gpuCount: r.gpuCount, ...(r.gpuType ? { gpu: r.gpuType } : {}) };
}

export function progressFor(e: LifecycleEvent): ContainerProgress {
  switch (e.kind) {
    case 'scheduled':
      return { state: 'scheduled', reason: e.event.reason, requested: requested(e.event.resources) };
    case 'starting':
      return { state: 'starting', reason: null };
    case 'started':
      return { state: 'running', reason: null, requested: requested(e.event.resources), startedAt: e.event.at };
    case 'ready':
      return { state: 'running', reason: null, readyAt: e.event.at };
    case 'stopped':
      return {
        state: 'stopped',
        reason: e.event.signal ? `${e.event.reason} (${e.event.signal})` : e.event.reason,
        stoppedAt: e.event.at,
        exitCode: e.event.exitCode,
        oomKilled: e.event.oomKilled,
      };
    case 'failed':
      return { state: 'failed', reason: `${e.event.phase}: ${e.event.error}`, stoppedAt: e.event.at };
  }
}
