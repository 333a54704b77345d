import { Check, Column, Entity, Index, PrimaryGeneratedColumn, Unique } from 'typeorm';
import { numberFromText } from '../column-transformers.js';

/**
 * Resources one container held over one period. A ledger: rows are written from events and
 * never updated, and carry no foreign keys so that usage outlives deleted deployments and
 * machines and ingestion never depends on the order in which rows elsewhere appear.
 */
@Entity({ name: 'usage_intervals' })
@Unique('uq_usage_intervals_event_id', ['eventId'])
@Check('ck_usage_intervals_period', 'period_end >= period_start')
@Index('ix_usage_intervals_workspace_period', ['workspaceId', 'periodStart'])
@Index('ix_usage_intervals_machine_period', ['machineId', 'periodStart'])
@Index('ix_usage_intervals_deployment_period', ['deploymentId', 'periodStart'])
export class UsageInterval {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  /** Id of the event the interval came from; redelivered events hit the unique constraint and are skipped. */
  @Column({ name: 'event_id', type: 'text' })
  eventId!: string;

  @Column({ name: 'workspace_id', type: 'uuid' })
  workspaceId!: string;

  @Column({ name: 'deployment_id', type: 'uuid' })
  deploymentId!: string;

  @Column({ name: 'container_id', type: 'text' })
  containerId!: string;

  @Column({ name: 'machine_id', type: 'text' })
  machineId!: string;

  @Column({ name: 'gpu_type', type: 'text', nullable: true })
  gpuType!: string | null;

  @Column({ name: 'gpu_count', type: 'integer', default: 0 })
  gpuCount!: number;

  @Column({ name: 'cpu_millicores', type: 'integer' })
  cpuMillicores!: number;

  @Column({ name: 'memory_bytes', type: 'bigint', transformer: numberFromText })
  memoryBytes!: number;

  @Column({ name: 'period_start', type: 'timestamptz' })
  periodStart!: Date;

  @Column({ name: 'period_end', type: 'timestamptz' })
  periodEnd!: Date;

  @Column({ name: 'seconds', type: 'double precision' })
  seconds!: number;
}
