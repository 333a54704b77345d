import { Type } from 'class-transformer';
import { IsIn, IsInt, IsISO8601, IsNumber, IsObject, IsOptional, IsString, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { SCALE_POLICIES, type ScalePolicy } from '../domain.js';
import { IsId } from '../validation.js';

/** queue-depth: tasks per container; request-latency: keep latency under a target; fixed: always min. */

/** What the policy saw. */
export class ScaleInputs {
  /** Tasks waiting (TASKS consumer) plus requests the gateway holds for this deployment. */
  @IsInt() @Min(0) queueDepth!: number;
  /** Tasks and requests being handled now. */
  @IsInt() @Min(0) inFlight!: number;
  /** Containers scheduled, starting or ready. */
  @IsInt() @Min(0) containers!: number;
  /** Ready containers idle past keep-warm: the only ones a scale-down may remove. */
  @IsInt() @Min(0) idleContainers!: number;
  @IsOptional() @IsNumber() @Min(0) averageTaskSeconds?: number;
  @IsOptional() @IsNumber() @Min(0) p95LatencyMs?: number;
}

export class ScaleDecision {
  @IsId() deploymentId!: string;
  @IsInt() @Min(1) deploymentVersion!: number;
  @IsIn(SCALE_POLICIES) policy!: ScalePolicy;
  @IsInt() @Min(0) desired!: number;
  @IsInt() @Min(0) previous!: number;
  @IsInt() @Min(0) min!: number;
  @IsInt() @Min(0) max!: number;
  /** One line a user can read, e.g. "queue 95 > 30 per container × 3". */
  @IsString() reason!: string;

  @IsObject()
  @ValidateNested()
  @Type(() => ScaleInputs)
  inputs!: ScaleInputs;

  @IsISO8601() decidedAt!: string;
}

export const SCALE_DECISION = defineContract({
  subject: 'tern.scale.decision.v1',
  kind: 'event',
  payload: ScaleDecision,
  stream: 'EVENTS',
  description:
    'The autoscaler changed the desired container count of a deployment (sent only when desired differs from previous). Sent by the autoscaler, together with the scale command; read by the gateway (deployment status and history).',
});
