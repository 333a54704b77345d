import { Histogram } from 'prom-client';
import type { DeploymentRecord } from '#tern/contracts';

const requestSeconds = new Histogram({
  name: 'tern_endpoint_request_duration_seconds',
  help: 'Endpoint requests per deployment version, from arrival at the gateway to the response sent, by status code',
  labelNames: ['deployment_id', 'deployment', 'version', 'status'],
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
});

/** Observes the request once its response is sent (or the caller hung up), whatever answered it. */
export function observeEndpointRequest(
  record: DeploymentRecord,
  raw: { once(event: 'close', fn: () => void): unknown; statusCode: number },
) {
  const end = requestSeconds.startTimer({ deployment_id: record.deploymentId, deployment: record.name, version: String(record.version) });
  raw.once('close', () => end({ status: String(raw.statusCode) }));
}
