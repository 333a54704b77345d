import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { numberFromText } from '../column-transformers.js';

/**
 * What metering knows of one container, built from its lifecycle events in whatever order they
 * arrive: the allotment and start from `container.started`, the end from the earliest ending
 * event, and how far a running container's usage has been written (`accruedTo`).
 */
@Entity({ name: 'metered_containers' })
@Index('ix_metered_containers_ended', ['endedAt'])
export class MeteredContainer {
  @PrimaryColumn({ name: 'container_id', type: 'text' })
  containerId!: string;

  @Column({ name: 'workspace_id', type: 'text' })
  workspaceId!: string;

  @Column({ name: 'deployment_id', type: 'text' })
  deploymentId!: string;

  @Column({ name: 'deployment_version', type: 'integer' })
  deploymentVersion!: number;

  @Column({ name: 'machine_id', type: 'text' })
  machineId!: string;

  /** Null until `container.started` (which carries the allotment) is seen. */
  @Column({ name: 'cpu_millicores', type: 'integer', nullable: true })
  cpuMillicores!: number | null;

  @Column({ name: 'memory_bytes', type: 'bigint', nullable: true, transformer: numberFromText })
  memoryBytes!: number | null;

  @Column({ name: 'gpu_count', type: 'integer', nullable: true })
  gpuCount!: number | null;

  @Column({ name: 'gpu_type', type: 'text', nullable: true })
  gpuType!: string | null;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt!: Date | null;

  @Column({ name: 'ended_at', type: 'timestamptz', nullable: true })
  endedAt!: Date | null;

  /** stopped, crashed or machine-lost: the event that set `endedAt`. */
  @Column({ name: 'end_reason', type: 'text', nullable: true })
  endReason!: string | null;

  @Column({ name: 'accrued_to', type: 'timestamptz', nullable: true })
  accruedTo!: Date | null;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
