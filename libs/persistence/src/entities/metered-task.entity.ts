import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { numberFromText } from '../column-transformers.js';

export type MeteredTaskOutcome = 'running' | 'completed' | 'failed';

/** One attempt of a task as metering saw it: where it ran, how it ended and how long it took. */
@Entity({ name: 'metered_tasks' })
@Check('ck_metered_tasks_outcome', "outcome IN ('running', 'completed', 'failed')")
@Index('ix_metered_tasks_ended', ['endedAt'])
export class MeteredTask {
  @PrimaryColumn({ name: 'task_id', type: 'text' })
  taskId!: string;

  @PrimaryColumn({ name: 'attempt', type: 'integer' })
  attempt!: number;

  @Column({ name: 'workspace_id', type: 'text' })
  workspaceId!: string;

  @Column({ name: 'deployment_id', type: 'text' })
  deploymentId!: string;

  /** Null for an attempt that failed before reaching a container. */
  @Column({ name: 'container_id', type: 'text', nullable: true })
  containerId!: string | null;

  @Column({ name: 'machine_id', type: 'text', nullable: true })
  machineId!: string | null;

  @Column({ name: 'outcome', type: 'text' })
  outcome!: MeteredTaskOutcome;

  @Column({ name: 'cause', type: 'text', nullable: true })
  cause!: string | null;

  @Column({ name: 'duration_ms', type: 'bigint', nullable: true, transformer: numberFromText })
  durationMs!: number | null;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt!: Date | null;

  @Column({ name: 'ended_at', type: 'timestamptz', nullable: true })
  endedAt!: Date | null;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
