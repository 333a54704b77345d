import { IsInt, IsISO8601, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class ScaleBacklog {
  @IsId() deploymentId!: string;
  /** Requests the gateway holds for the deployment because no container is ready. */
  @IsInt() @Min(1) heldRequests!: number;
  @IsInt() @Min(0) oldestWaitMs!: number;
  @IsISO8601() at!: string;
}

export const SCALE_BACKLOG = defineContract({
  subject: 'tern.scale.backlog.v1',
  kind: 'event',
  payload: ScaleBacklog,
  stream: 'EVENTS',
  description:
    'An endpoint has requests waiting and no ready container: the ask for a scale-from-zero. Sent by the gateway when it starts holding requests for a deployment (and again while they wait); read by the autoscaler, which decides at once instead of at its next tick.',
});
