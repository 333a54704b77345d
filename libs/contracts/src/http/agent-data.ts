/**
 * The agent's data plane over the gateway's HTTPS API, with its machine token: the gateway
 * serves a machine only what is placed on it (the object stores are the control plane's).
 */

/** `GET <AGENT_CODE_PATH>/sha256:<hex>`: a code bundle used by a container placed on the caller. */
export const AGENT_CODE_PATH = '/api/v1/agent/code';

/**
 * `GET <REGISTRY_TOKEN_PATH>?service=…&scope=repository:<repo>:pull`: the image registry's token
 * realm (Docker token auth), with the machine token as the Basic-auth password.
 */
export const REGISTRY_TOKEN_PATH = '/api/v1/registry/token';

/**
 * `GET <AGENT_BODIES_PATH>/<requestId>`: a request body too large for one invoke message, served
 * once (then deleted) and only to the machine the request was routed to.
 */
export const AGENT_BODIES_PATH = '/api/v1/agent/bodies';

/**
 * `PUT <agentResultPath(taskId, attempt)>`: a task result over TASK_RESULT_INLINE_BYTES, as
 * application/octet-stream (the JSON bytes), from the machine holding that attempt's lease; once.
 */
export function agentResultPath(taskId: string, attempt: number): string {
  return `/api/v1/agent/tasks/${encodeURIComponent(taskId)}/attempts/${attempt}/result`;
}

/**
 * `GET <agentTaskPermitPath(deploymentId, version)>`: a task permit, the NATS user a machine pulls one
 * task-queue version's tasks with, while a container of that version is placed on it (404
 * otherwise). Signed for the machine's own NATS key; its permissions allow only that version's
 * consumer (`taskConsumerName`): its info, its pulls and acks of its deliveries.
 */
export function agentTaskPermitPath(deploymentId: string, version: number): string {
  return `${AGENT_TASK_PERMITS_PATH}/${encodeURIComponent(deploymentId)}/versions/${version}`;
}

export const AGENT_TASK_PERMITS_PATH = '/api/v1/agent/task-permits';
