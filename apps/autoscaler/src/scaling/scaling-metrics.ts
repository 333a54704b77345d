import { Counter, Gauge } from 'prom-client';
import type { DeploymentRecord } from '#tern/contracts';
import type { Decision, Observation } from '#tern/autoscaling';

/** Labels of one deployment version on the autoscaler's series: its id, a readable name, the version. */
const LABELS = ['deployment_id', 'deployment', 'version'] as const;

const queueDepth = new Gauge({
  name: 'tern_task_queue_depth',
  help: 'Tasks (task queues) or requests (endpoints) waiting for a container, per deployment version, as the autoscaler last saw them',
  labelNames: [...LABELS, 'kind'],
});

const containers = new Gauge({
  name: 'tern_deployment_containers',
  help: 'Containers per deployment version: desired (the autoscaler decision) and ready (the containers gateways route to)',
  labelNames: [...LABELS, 'state'],
});

const inFlight = new Gauge({
  name: 'tern_deployment_in_flight',
  help: 'Requests or tasks inside containers now, per deployment version',
  labelNames: LABELS,
});

const decisions = new Counter({
  name: 'tern_autoscaler_scale_decisions_total',
  help: 'Changes of a deployment version desired container count, by direction',
  labelNames: [...LABELS, 'direction'],
});

function labels(record: DeploymentRecord) {
  return { deployment_id: record.deploymentId, deployment: record.name, version: String(record.version) };
}

/** The autoscaler's view of one version after a control step. */
export function recordStep(record: DeploymentRecord, o: Observation, d: Decision): void {
  const l = labels(record);
  queueDepth.set({ ...l, kind: record.spec.kind }, o.buffered);
  containers.set({ ...l, state: 'desired' }, d.desired);
  containers.set({ ...l, state: 'ready' }, o.containers.length);
  inFlight.set(l, o.inFlight);
}

export function recordDecision(record: DeploymentRecord, previous: number, desired: number): void {
  if (previous !== desired) decisions.inc({ ...labels(record), direction: desired > previous ? 'up' : 'down' });
}

/** A version scaled to nothing and forgotten: its series go too. */
export function forgetVersion(record: DeploymentRecord): void {
  const l = labels(record);
  queueDepth.remove({ ...l, kind: record.spec.kind });
  containers.remove({ ...l, state: 'desired' });
  containers.remove({ ...l, state: 'ready' });
  inFlight.remove(l);
}
