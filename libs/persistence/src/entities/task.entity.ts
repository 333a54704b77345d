import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
  type Relation,
  UpdateDateColumn,
} from 'typeorm';
import { type TaskSpotCheckRecord, type TaskState } from '#tern/contracts';
import { numberFromText } from '../column-transformers.js';
import { DeploymentVersion } from './deployment-version.entity.js';
import { Deployment } from './deployment.entity.js';
import { Workspace } from './workspace.entity.js';

/** States a task never leaves; a result or error is final once one is reached. */

/** One unit of work submitted to a task queue (or a function call). */
@Entity({ name: 'tasks' })
@Index('ix_tasks_deployment_state_created', ['deploymentId', 'state', 'createdAt'])
@Index('ix_tasks_workspace_created', ['workspaceId', 'createdAt'])
@Index('ix_tasks_callback_due', ['callbackNextAt'], { where: "callback_state = 'pending'" })
@Index('ix_tasks_unsent', ['createdAt'], { where: 'enqueued_at IS NULL' })
@Index('ix_tasks_spot_check_pending', ['endedAt'], { where: "spot_check->>'state' = 'pending'" })
@Check('ck_tasks_callback_state', "callback_state IN ('pending', 'delivered', 'failed')")
export class Task {
  /** The gateway may set it before publishing, so the JetStream message id and the row agree. */
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'workspace_id', type: 'uuid' })
  workspaceId!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_tasks_workspace' })
  workspace?: Relation<Workspace>;

  @Column({ name: 'deployment_id', type: 'uuid' })
  deploymentId!: string;

  @ManyToOne(() => Deployment, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'deployment_id', foreignKeyConstraintName: 'fk_tasks_deployment' })
  deployment?: Relation<Deployment>;

  /** The version that ran it; null until picked up, or when that version has been deleted. */
  @Column({ name: 'deployment_version_id', type: 'uuid', nullable: true })
  deploymentVersionId!: string | null;

  /** The version number it was submitted to (`deploymentVersionId` is that version's row). */
  @Column({ name: 'deployment_version', type: 'integer', default: 1 })
  version!: number;

  @ManyToOne(() => DeploymentVersion, { onDelete: 'SET NULL', nullable: true })
  @JoinColumn({ name: 'deployment_version_id', foreignKeyConstraintName: 'fk_tasks_deployment_version' })
  deploymentVersion?: Relation<DeploymentVersion> | null;

  @Column({ name: 'state', type: 'varchar', length: 32, default: 'PENDING' })
  state!: TaskState;

  @Column({ name: 'payload', type: 'jsonb' })
  payload!: unknown;

  @Column({ name: 'result', type: 'jsonb', nullable: true })
  result!: unknown;

  /** Where a result too large for a row was put (an object store key), instead of `result`. */
  @Column({ name: 'result_ref', type: 'text', nullable: true })
  resultRef!: string | null;

  @Column({ name: 'error', type: 'text', nullable: true })
  error!: string | null;

  @Column({ name: 'attempts', type: 'integer', default: 0 })
  attempts!: number;

  @Column({ name: 'max_retries', type: 'integer' })
  maxRetries!: number;

  @Column({ name: 'timeout_seconds', type: 'integer' })
  timeoutSeconds!: number;

  /** How long the task may wait in the queue before it expires; null waits forever. */
  @Column({ name: 'ttl_seconds', type: 'integer', nullable: true })
  ttlSeconds!: number | null;

  @Column({ name: 'callback_url', type: 'text', nullable: true })
  callbackUrl!: string | null;

  /** Its message's sequence in TASKS, to delete it on cancel or expiry; null until published. */
  @Column({ name: 'stream_seq', type: 'bigint', nullable: true, transformer: numberFromText })
  streamSeq!: number | null;

  /** When TASKS acknowledged it; null means not (yet) published, and a sweep publishes it. */
  @Column({ name: 'enqueued_at', type: 'timestamptz', nullable: true })
  enqueuedAt!: Date | null;

  /** The machine of its latest attempt. */
  @Column({ name: 'machine_id', type: 'text', nullable: true })
  machineId!: string | null;

  /** pending: to be POSTed (at callback_next_at); delivered; failed: gave up after retries. Null: no callback. */
  @Column({ name: 'callback_state', type: 'varchar', length: 16, nullable: true })
  callbackState!: 'pending' | 'delivered' | 'failed' | null;

  @Column({ name: 'callback_attempts', type: 'integer', default: 0 })
  callbackAttempts!: number;

  @Column({ name: 'callback_next_at', type: 'timestamptz', nullable: true })
  callbackNextAt!: Date | null;

  /** Why the last callback attempt failed (an answer, a refused address); null once delivered. */
  @Column({ name: 'callback_error', type: 'text', nullable: true })
  callbackError!: string | null;

  /** No foreign key: a task's history outlives the container that ran it. */
  @Column({ name: 'container_id', type: 'text', nullable: true })
  containerId!: string | null;

  /** Its spot check, when its deployment asked for them and it was drawn (TaskSpotCheckRecord); null otherwise. */
  @Column({ name: 'spot_check', type: 'jsonb', nullable: true })
  spotCheck!: TaskSpotCheckRecord | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt!: Date | null;

  @Column({ name: 'ended_at', type: 'timestamptz', nullable: true })
  endedAt!: Date | null;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
