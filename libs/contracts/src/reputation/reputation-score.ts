import { IsISO8601, IsNumber, Max, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId, IsRecordOf } from '../validation.js';

export class ReputationScore {
  @IsId() machineId!: string;
  /** 0 = never place here, 1 = perfectly reliable. Compared with a deployment's min_reputation. */
  @IsNumber() @Min(0) @Max(1) score!: number;
  /** Named inputs to the score, each 0..1, e.g. { uptime: 0.99, taskSuccess: 0.97, startLatency: 0.8, heartbeat: 1, benchmark: 0.9 }. */
  @IsRecordOf('number') components!: Record<string, number>;
  @IsISO8601() computedAt!: string;
}

export const REPUTATION_SCORE = defineContract({
  subject: 'tern.reputation.score.v1',
  kind: 'event',
  payload: ReputationScore,
  stream: 'EVENTS',
  description:
    "A machine's reliability score was recomputed. Sent by reputation; read by the scheduler (prefers reliable machines, honours min_reputation) and the gateway (machines API).",
});
