import { IsIn, IsInt, IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { ID_PATTERN, IsId, IsRecordOf } from '../validation.js';

export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/**
 * The request head, sent as JSON in the `Tern-Invoke` NATS header; the message's data is the
 * raw body (or empty when the body went through the object store, see `bodyRef`).
 */
export class InvokeHead {
  @IsId() requestId!: string;
  @IsId() deploymentId!: string;
  @IsIn(HTTP_METHODS) method!: HttpMethod;
  /** Path and query inside the deployment, e.g. "/generate?stream=true". */
  @Matches(/^\//, { message: 'path must start with /' }) path!: string;
  /** Lower-case names; hop-by-hop headers and Tern's credentials removed by the gateway. */
  @IsRecordOf('string') headers!: Record<string, string>;
  /** The agent answers 504 itself once this has passed. */
  @IsInt() @Min(1) timeoutMs!: number;
  @IsInt() @Min(0) bodyBytes!: number;
  /** Object name in the `bodies` object store when the body was too big for one message; the server deletes it after reading. */
  @IsOptional() @IsString() bodyRef?: string;
}

/** The response head: status and headers, JSON in `Tern-Status` / `Tern-Headers` of the first response message. */
export class InvokeResponseHead {
  @IsInt() @Min(100) @Max(599) status!: number;
  @IsRecordOf('string') headers!: Record<string, string>;
}

/** A broken rule of a head: the property and class-validator's message for it. */
export interface HeadProblem {
  property: string;
  message: string;
}

/** "<property>: <message>; …", as describeValidationErrors words class-validator's errors. */
export function describeHeadProblems(problems: readonly HeadProblem[]): string {
  return problems.map((p) => `${p.property}: ${p.message}`).join('; ');
}

const INVOKE_HEAD_FIELDS = new Set(['requestId', 'deploymentId', 'method', 'path', 'headers', 'timeoutMs', 'bodyBytes', 'bodyRef']);

/**
 * InvokeHead's rules checked by hand, with class-validator's messages (whitelist and
 * forbidNonWhitelisted included): the agent checks every request's head, and class-transformer
 * plus class-validator were its largest cost after the socket writes. invoke.spec.ts holds the
 * two to agreement.
 */
export function invokeHeadProblems(head: Record<string, unknown>): HeadProblem[] {
  const problems: HeadProblem[] = [];
  for (const key of Object.keys(head))
    if (!INVOKE_HEAD_FIELDS.has(key)) problems.push({ property: key, message: `property ${key} should not exist` });
  for (const key of ['requestId', 'deploymentId'])
    if (typeof head[key] !== 'string' || !ID_PATTERN.test(head[key]))
      problems.push({ property: key, message: `${key} must be 1-64 letters, digits, - or _` });
  if (!(HTTP_METHODS as readonly unknown[]).includes(head.method))
    problems.push({ property: 'method', message: `method must be one of the following values: ${HTTP_METHODS.join(', ')}` });
  if (typeof head.path !== 'string' || !head.path.startsWith('/')) problems.push({ property: 'path', message: 'path must start with /' });
  if (!isRecordOfStrings(head.headers))
    problems.push({ property: 'headers', message: 'headers must be an object whose values are all strings' });
  integerAtLeast(head, 'timeoutMs', 1, problems);
  integerAtLeast(head, 'bodyBytes', 0, problems);
  if (head.bodyRef !== undefined && head.bodyRef !== null && typeof head.bodyRef !== 'string')
    problems.push({ property: 'bodyRef', message: 'bodyRef must be a string' });
  return problems;
}

function integerAtLeast(head: Record<string, unknown>, key: string, min: number, problems: HeadProblem[]): void {
  if (!Number.isInteger(head[key])) problems.push({ property: key, message: `${key} must be an integer number` });
  if (!(typeof head[key] === 'number' && head[key] >= min))
    problems.push({ property: key, message: `${key} must not be less than ${min}` });
}

function isRecordOfStrings(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.values(value).every((v) => typeof v === 'string');
}

/**
 * InvokeResponseHead's rules checked by hand, with class-validator's messages: every response
 * of every invoke passes here, and class-transformer plus class-validator cost more than the
 * rest of the response's handling on the gateway. invoke.spec.ts holds the two to agreement.
 */
export function invokeResponseHeadProblems(head: { status: unknown; headers: unknown }): HeadProblem[] {
  const problems: HeadProblem[] = [];
  const { status, headers } = head;
  if (!Number.isInteger(status)) problems.push({ property: 'status', message: 'status must be an integer number' });
  if (!(Number(status) >= 100)) problems.push({ property: 'status', message: 'status must not be less than 100' });
  if (!(Number(status) <= 599)) problems.push({ property: 'status', message: 'status must not be greater than 599' });
  if (!isRecordOfStrings(headers))
    problems.push({ property: 'headers', message: 'headers must be an object whose values are all strings' });
  return problems;
}

/** NATS headers of the invoke protocol (see INVOKE's description). */
export const INVOKE_HEADERS = {
  head: 'Tern-Invoke',
  seq: 'Tern-Seq',
  status: 'Tern-Status',
  headers: 'Tern-Headers',
  end: 'Tern-End',
  error: 'Tern-Error',
  errorCode: 'Tern-Error-Code',
  /** Sent by the server every second while it works, so a caller notices a dead agent in seconds, not at the timeout. */
  keepalive: 'Tern-Keepalive',
  /** Sent by the caller on the request's subject, naming the request's reply subject: it no longer wants the answer. */
  cancel: 'Tern-Cancel',
} as const;

export const INVOKE = defineContract({
  subject: 'tern.agent.*.invoke.*.v1',
  kind: 'request',
  payload: InvokeHead,
  reply: InvokeResponseHead,
  description: [
    "An HTTP request for an endpoint, forwarded to one container. Tokens: machine id, container id (only that machine's agent may hear it). Sent by the gateway to the least-loaded ready container of the deployment; answered by that container's agent, which passes it to the container on $PORT. Core NATS so no worker needs an inbound port.",
    "Request: one message whose reply subject is an inbox the caller subscribed first; header `Tern-Invoke` holds the InvokeHead as JSON; the data is the raw body when it fits in one message (the server's max_payload less 64 KiB), otherwise the gateway puts the body in the object store bucket `bodies` (5-minute TTL) as `<machineId>.<bodyRef>` and the agent fetches it once over HTTPS (GET /api/v1/agent/bodies/<bodyRef>, machine token), which deletes it.",
    'Response: a stream of messages to the inbox, each with `Tern-Seq: <n>` from 0. The first carries `Tern-Status` and `Tern-Headers` (JSON, the InvokeResponseHead); every message carries a body chunk of at most 256 KiB; the last has `Tern-End: 1`. An error, before the head or during the body, is an end message with `Tern-Error: <message>` and `Tern-Error-Code: <http code>` (400 invalid head, 500 handler failure, 502 response over 16 MiB or container gone, 504 timeout). No responders means the container is gone (the caller answers 503).',
    "Cancel: a caller that no longer wants the answer (its client hung up, or one of its limits passed) publishes an empty message without a reply subject on the request's subject, with header `Tern-Cancel: <the request's reply subject>`; the server stops the request (the agent closes its connection to the container, which sees its client go away) and sends nothing more.",
  ].join('\n\n'),
});
