import type { AgentLoadReport, ContainerServerLoad, LoadReport, RouteRecord, ServerLoadReport } from '#tern/contracts';

/**
 * A machine's load report as far as the scheduler's placements vouch for it: only the containers
 * the routes bucket places on that machine for that version count, and its totals are summed
 * from them (never the machine's own). Undefined when it names containers but none of them is
 * placed there: nothing of it is believed. An empty report (the version's last) stays empty.
 */
export function placedPartOf(report: AgentLoadReport, routeOf: (containerId: string) => RouteRecord | undefined): LoadReport | undefined {
  const containers = report.containers.filter((c) => {
    const route = routeOf(c.containerId);
    return route?.machineId === report.machineId && route.deploymentId === report.deploymentId && route.version === report.version;
  });
  if (report.containers.length > 0 && containers.length === 0) return undefined;
  return {
    gatewayId: `agent-${report.machineId}`,
    deploymentId: report.deploymentId,
    version: report.version,
    inFlight: containers.reduce((n, c) => n + c.inFlight, 0),
    buffered: 0,
    meanDurationMs: report.meanDurationMs,
    containers,
    at: report.at,
  };
}

/**
 * The container loads of a server-load report that the routes place on the reporting machine for
 * that version: a machine cannot move another machine's, version's or deployment's scale.
 */
export function placedServerLoads(
  report: ServerLoadReport,
  routeOf: (containerId: string) => RouteRecord | undefined,
): ContainerServerLoad[] {
  return report.containers.filter((c) => {
    const route = routeOf(c.containerId);
    return route?.machineId === report.machineId && route.deploymentId === report.deploymentId && route.version === report.version;
  });
}

/**
 * How long a machine's reports for a version may name only containers not placed there before
 * that is worth a warning: a container's first reports often come before the scheduler has
 * written its route, and those say nothing about the machine.
 */
export const UNPLACED_WARN_AFTER_MS = 15_000;

/** Per version and machine, since when its reports were refused without one counted between. */
export class UnplacedStreaks {
  /** `<deploymentId>.<version>` → machineId → the streak's start, and whether it was warned of. */
  private readonly streaks = new Map<string, Map<string, { since: number; warned: boolean }>>();

  /** A refused report: true once per streak, when it has lasted UNPLACED_WARN_AFTER_MS. */
  refused(key: string, machineId: string, now: number): boolean {
    let byMachine = this.streaks.get(key);
    if (!byMachine) this.streaks.set(key, (byMachine = new Map()));
    const streak = byMachine.get(machineId);
    if (!streak) {
      byMachine.set(machineId, { since: now, warned: false });
      return false;
    }
    if (streak.warned || now - streak.since < UNPLACED_WARN_AFTER_MS) return false;
    streak.warned = true;
    return true;
  }

  /** A counted report ends the machine's streak. */
  counted(key: string, machineId: string): void {
    this.streaks.get(key)?.delete(machineId);
  }

  forget(key: string): void {
    this.streaks.delete(key);
  }
}
