import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * The reputation service's working state for one machine: everything its score is computed
 * from, as one document (libs/reputation's MachineRecord). No foreign key: a removed
 * machine's record fades out by itself, and events may name a machine before its row exists.
 */
@Entity({ name: 'reputation_machines' })
export class ReputationMachine {
  @PrimaryColumn({ name: 'machine_id', type: 'text', primaryKeyConstraintName: 'pk_reputation_machines' })
  machineId!: string;

  @Column({ name: 'pool', type: 'text', nullable: true })
  pool!: string | null;

  @Column({ name: 'record', type: 'jsonb' })
  record!: Record<string, unknown>;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
