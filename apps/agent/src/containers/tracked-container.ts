import { type ContainerFailurePhase } from '#tern/contracts';
import { ContainerStartError, type ExitResult, ImageError } from '#tern/runtime';
import { CodeBundleError } from '../code/code-bundles.js';
import type { ContainerEndpoint } from '../invoke/forward.js';
import { type ContainerRowState } from '../state/agent-state.js';
import { VolumeMountError } from '../volumes/volume-mounts.js';
import { type ContainerRecord } from './container-spec.js';

/** One container this agent looks after. */
export interface Tracked {
  record: ContainerRecord;
  /** When the start command arrived (ms), for the latencies. */
  acceptedAt: number;
  endpoint?: ContainerEndpoint;
  state: ContainerRowState;
  /** Set by a stop command (or shutdown): the exit is then expected. */
  stopReason?: string;
  /** container.failed already sent (a failed health check), so the exit does not send another. */
  failed?: boolean;
  /** Until it is ready: the last readiness probe's outcome (`GET /health: answered 404`), for a failure before then. */
  notReady?: string;
  /** Aborts the health check and the log tail. */
  readonly abort: AbortController;
  logs?: Promise<void>;
  /** Resolves once container.stopped is out and the container removed. */
  done?: Promise<void>;
  logSequence: number;
}

/** Where the agent reaches a container's $PORT: its own address on a private network, else loopback. */
export function endpointOf(c: { port?: number; address?: string }): ContainerEndpoint | undefined {
  return c.port === undefined ? undefined : { host: c.address ?? '127.0.0.1', port: c.port };
}

/** Which step of a start an error ended: getting its image, code or volumes; creating it; or starting it. */
export function failurePhase(e: unknown): ContainerFailurePhase {
  if (e instanceof ImageError || e instanceof CodeBundleError || e instanceof VolumeMountError) return 'image';
  if (e instanceof ContainerStartError) return 'start';
  // An invalid spec, secrets it could not have, and anything unforeseen.
  return 'create';
}

/** How a container ended, in words (`exited with code 1 before it was ready (last GET /health: …)`). */
export function describeExit(exit: ExitResult, notReady?: string): string {
  const how = exit.oomKilled
    ? 'killed for using more memory than it was given'
    : exit.signal
      ? `killed by ${exit.signal}`
      : `exited with code ${exit.exitCode}`;
  return how + (notReady ? ` before it was ready (last ${notReady})` : '');
}
