import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * The reputation service's working state for one machine: everything its score is computed
 * from, as one document (libs/reputation's MachineRecord). No foreign key: a removed
 * machine's record fades out by itself, and events may name a machine before its row exists.
 */
@Entity({ name: 'reputation_machines' })
@Index('ix_reputation_machines_updated_at', ['updatedAt'])
export class ReputationMachine {
  @PrimaryColumn({ name: 'machine_id', type: 'text', primaryKeyConstraintName: 'pk_reputation_machines' })
  machineId!: string;

  @Column({ name: 'pool', type: 'text', nullable: true })
  pool!: string | null;

  @Column({ name: 'record', type: 'jsonb' })
  record!: Record<string, unknown>;

  /** Heartbeat punctuality (libs/reputation's HeartbeatRecord), apart so a beat writes only this. */
  @Column({ name: 'heartbeats', type: 'jsonb', nullable: true })
  heartbeats!: Record<string, unknown> | null;

  @Column({ name: 'has_transitions', type: 'boolean', default: false })
  hasTransitions!: boolean;

  /** When `record` last changed. */
  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;

  /** When `heartbeats` last changed. */
  @Column({ name: 'heartbeat_at', type: 'timestamptz', default: () => 'now()' })
  heartbeatAt!: Date;
}
