import type { ContainerRuntime, ExitResult, ManagedContainer, RuntimeLogger } from './types.js';
import { silentLogger } from './types.js';

export type ReconcileDecision = 'adopt' | 'kill';

export interface ReconcileOptions {
  /** Whether the agent still wants this container (e.g. the scheduler still places it here). */
  decide: (container: ManagedContainer) => ReconcileDecision | Promise<ReconcileDecision>;
  /** SIGTERM grace for containers being killed (default 10 s). */
  graceMs?: number;
  logger?: RuntimeLogger;
}

export interface ReconcileReport {
  /** Running and wanted: the agent now owns them again. */
  adopted: ManagedContainer[];
  /** Running but not wanted: stopped and removed. */
  killed: { container: ManagedContainer; exit: ExitResult }[];
  /**
   * Exited while no agent watched. Wanted ones are left in place for the agent to report
   * (container.stopped) and then remove(); the rest are removed here.
   */
  exited: { container: ManagedContainer; exit?: ExitResult; removed: boolean }[];
  failed: { container: ManagedContainer; error: Error }[];
}

/**
 * Run at agent start-up: every container the runtime manages is either adopted or killed, so
 * none is left running unknown after a crash.
 */
export async function reconcile(runtime: ContainerRuntime, options: ReconcileOptions): Promise<ReconcileReport> {
  const log = options.logger ?? silentLogger;
  const report: ReconcileReport = { adopted: [], killed: [], exited: [], failed: [] };
  for (const container of await runtime.list()) {
    try {
      const decision = await options.decide(container);
      const live = container.status === 'running' || container.status === 'creating' || container.status === 'paused';
      if (live && decision === 'adopt') {
        report.adopted.push(await runtime.adopt(container.id));
      } else if (live) {
        const exit = await runtime.stop(container.id, options.graceMs ?? 10_000);
        await runtime.remove(container.id);
        report.killed.push({ container, exit });
        log.warn({ containerId: container.id, labels: container.labels }, 'killed a container no one owns');
      } else {
        const removed = decision === 'kill';
        if (removed) await runtime.remove(container.id);
        report.exited.push({ container, ...(container.exit ? { exit: container.exit } : {}), removed });
      }
    } catch (e) {
      report.failed.push({ container, error: e as Error });
      log.error({ containerId: container.id, err: e }, 'could not reconcile container');
    }
  }
  return report;
}
