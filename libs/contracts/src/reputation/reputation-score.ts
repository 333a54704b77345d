import { IsIn, IsISO8601, IsNumber, Max, Min } from 'class-validator';
import { REPUTATION_STANDINGS, type ReputationStanding } from '../buckets.js';
import { defineContract } from '../contract.js';
import { IsId, IsRecordOf } from '../validation.js';

export class ReputationScoreChanged {
  @IsId() machineId!: string;
  /** 0 = never place here, 1 = perfectly reliable. Compared with a deployment's min_reputation. */
  @IsNumber() @Min(0) @Max(1) score!: number;
  /**
   * Named inputs to the score, each 0..1: the weighted uptime, taskSuccess, startSuccess,
   * startLatency, heartbeat and (only once the control plane measured it) network, plus
   * uptime1d, uptime7d and uptime30d (see docs/architecture.md, Reputation).
   */
  @IsRecordOf('number') components!: Record<string, number>;
  /** Starts and task attempts the control plane saw end on the machine (decayed). */
  @IsNumber() @Min(0) observed!: number;
  /** `unproven` while few of them were seen: the score is then mostly the prior's guess. */
  @IsIn(REPUTATION_STANDINGS) standing!: ReputationStanding;
  @IsISO8601() computedAt!: string;
}

export const REPUTATION_SCORE = defineContract({
  subject: 'tern.reputation.score.v1',
  kind: 'event',
  payload: ReputationScoreChanged,
  stream: 'EVENTS',
  description:
    "A machine's reliability score changed meaningfully (or its periodic history row was written). Sent by reputation, which also puts the same {score, components, observed, standing, computedAt} into the `reputation` KV bucket (what the scheduler reads for placement) and a row into reputation_scores (history, read by the gateway). Nats-Msg-Id: `<machine id>:<computedAt>`. For subscribers that want to react to changes.",
});
