import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, type Relation, UpdateDateColumn } from 'typeorm';
import { type ContainerState } from '#tern/contracts';
import { DeploymentVersion } from './deployment-version.entity.js';
import { Machine } from './machine.entity.js';

/** What a container asked for when it was placed; metering and placement both read it. */
export interface ContainerResources {
  readonly cpuMillicores: number;
  readonly memoryBytes: number;
  /** GPU model, absent for CPU-only containers. */
  readonly gpu?: string;
  readonly gpuCount: number;
  /** The GPUs the scheduler reserved on the machine when it placed the container. */
  readonly gpuIndexes?: number[];
}

/** One running (or once running) instance of a deployment version on a machine. */
@Entity({ name: 'containers' })
@Index('ix_containers_deployment_version_state', ['deploymentVersionId', 'state'])
@Index('ix_containers_machine_state', ['machineId', 'state'])
export class Container {
  /** Chosen by the scheduler before placement, so commands and events can name it at once. */
  @PrimaryColumn({ name: 'id', type: 'text' })
  id!: string;

  @Column({ name: 'deployment_version_id', type: 'uuid' })
  deploymentVersionId!: string;

  @ManyToOne(() => DeploymentVersion, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'deployment_version_id', foreignKeyConstraintName: 'fk_containers_deployment_version' })
  deploymentVersion?: Relation<DeploymentVersion>;

  /** Null while waiting for capacity, and after the machine itself is removed. */
  @Column({ name: 'machine_id', type: 'text', nullable: true })
  machineId!: string | null;

  @ManyToOne(() => Machine, { onDelete: 'SET NULL', nullable: true })
  @JoinColumn({ name: 'machine_id', foreignKeyConstraintName: 'fk_containers_machine' })
  machine?: Relation<Machine> | null;

  @Column({ name: 'state', type: 'varchar', length: 32, default: 'pending' })
  state!: ContainerState;

  /** Why it reached its state: the placement reason, the stop reason, or the failure's phase and error. */
  @Column({ name: 'state_reason', type: 'text', nullable: true })
  stateReason!: string | null;

  @Column({ name: 'exit_code', type: 'integer', nullable: true })
  exitCode!: number | null;

  @Column({ name: 'oom_killed', type: 'boolean', default: false })
  oomKilled!: boolean;

  @Column({ name: 'requested', type: 'jsonb' })
  requested!: ContainerResources;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt!: Date | null;

  /** First passing health check (container.ready); the state stays running. */
  @Column({ name: 'ready_at', type: 'timestamptz', nullable: true })
  readyAt!: Date | null;

  @Column({ name: 'stopped_at', type: 'timestamptz', nullable: true })
  stoppedAt!: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
