import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import type { ReputationStanding } from '#tern/contracts';

/**
 * One computed reliability score for a machine; the newest row per machine is current and
 * older rows are its history. No foreign key, for the same reason as usage: history
 * outlives the machine.
 */
@Entity({ name: 'reputation_scores' })
// Serves "latest score per machine". The migration defines it as (machine_id, computed_at DESC),
// which @Index cannot express, so schema comparison is told to leave it alone.
@Index('ix_reputation_scores_machine_computed', { synchronize: false })
export class ReputationScore {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'machine_id', type: 'text' })
  machineId!: string;

  /** 0 (unreliable) to 1 (perfect). */
  @Column({ name: 'score', type: 'double precision' })
  score!: number;

  /** The inputs the score was computed from (uptime, task success, start latency, ...), for explaining it. */
  @Column({ name: 'components', type: 'jsonb', default: () => "'{}'" })
  components!: Record<string, number>;

  /** Starts and task attempts the control plane saw end on the machine (decayed) when the score was computed. */
  @Column({ name: 'observed', type: 'double precision', default: 0 })
  observed!: number;

  /** `unproven` while `observed` is below the reputation service's threshold, `proven` after. */
  @Column({ name: 'standing', type: 'varchar', length: 16, default: 'unproven' })
  standing!: ReputationStanding;

  @Column({ name: 'computed_at', type: 'timestamptz', default: () => 'now()' })
  computedAt!: Date;
}
