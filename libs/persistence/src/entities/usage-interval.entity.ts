import { Check, Column, Entity, Index, PrimaryGeneratedColumn, Unique } from 'typeorm';
import { numberFromText } from '../column-transformers.js';

/**
 * Resources one container held during one UTC hour (or the part of it the container ran). The
 * event id is the container id and the hour, so every write of a slice — a checkpoint growing
 * it, the container's end fixing it — is an upsert of the same row and nothing counts twice.
 * `closed` marks a slice that no checkpoint will touch again. No foreign keys: usage outlives
 * deleted deployments and machines, and ingestion never depends on rows elsewhere.
 */
@Entity({ name: 'usage_intervals' })
@Unique('uq_usage_intervals_event_id', ['eventId'])
@Check('ck_usage_intervals_period', 'period_end >= period_start')
@Index('ix_usage_intervals_workspace_period', ['workspaceId', 'periodStart'])
@Index('ix_usage_intervals_machine_period', ['machineId', 'periodStart'])
@Index('ix_usage_intervals_deployment_period', ['deploymentId', 'periodStart'])
@Index('ix_usage_intervals_container', ['containerId'])
@Index('ix_usage_intervals_period', ['periodStart'])
export class UsageInterval {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  /** `<container id>:<hour, ISO>`; also the USAGE_INTERVAL event's id. */
  @Column({ name: 'event_id', type: 'text' })
  eventId!: string;

  @Column({ name: 'workspace_id', type: 'text' })
  workspaceId!: string;

  @Column({ name: 'deployment_id', type: 'text' })
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

  @Column({ name: 'closed', type: 'boolean', default: false })
  closed!: boolean;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
