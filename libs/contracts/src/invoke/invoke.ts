import { IsBase64, IsIn, IsInt, IsOptional, Matches, Max, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId, IsRecordOf } from '../validation.js';

export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export class InvokeRequest {
  @IsId() requestId!: string;
  @IsId() deploymentId!: string;
  @IsIn(HTTP_METHODS) method!: HttpMethod;
  /** Path and query inside the deployment, e.g. "/?stream=false". */
  @Matches(/^\//, { message: 'path must start with /' }) path!: string;
  /** Lower-case names; hop-by-hop headers and Tern's credentials removed by the gateway. */
  @IsRecordOf('string') headers!: Record<string, string>;
  @IsOptional() @IsBase64() bodyBase64?: string;
  /** The agent answers 504 itself once this has passed. */
  @IsInt() @Min(1) timeoutMs!: number;
}

export class InvokeReply {
  @IsInt() @Min(100) @Max(599) status!: number;
  @IsRecordOf('string') headers!: Record<string, string>;
  @IsOptional() @IsBase64() bodyBase64?: string;
  /** Time inside the container, for the autoscaler's latency input. */
  @IsInt() @Min(0) durationMs!: number;
}

export const INVOKE = defineContract({
  subject: 'tern.invoke.*.v1',
  kind: 'request',
  payload: InvokeRequest,
  reply: InvokeReply,
  description:
    "An HTTP request for an endpoint, forwarded to one container. Token: container id. Sent by the gateway to the least-loaded ready container of the deployment; answered by that container's agent, which passes it to the container on $PORT (POST /) and replies with the response. Core NATS so no worker needs an inbound port; bodies larger than the server's max_payload are refused by the gateway with 413.",
});
