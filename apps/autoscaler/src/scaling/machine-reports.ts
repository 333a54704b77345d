import type { AgentLoadReport, LoadReport, RouteRecord } from '#tern/contracts';

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
