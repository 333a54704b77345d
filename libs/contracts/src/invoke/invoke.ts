import { IsIn, IsInt, IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId, IsRecordOf } from '../validation.js';

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
  ].join('\n\n'),
});
