import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn, type Relation, Unique } from 'typeorm';
import { Deployment } from './deployment.entity.js';

/**
 * One immutable revision of a deployment's spec. Containers point at a version, not at the
 * deployment, so a rollout can tell old containers from new ones.
 */
@Index('ix_deployment_versions_desired', ['desiredContainers'], { where: 'desired_containers > 0' })
@Entity({ name: 'deployment_versions' })
@Unique('uq_deployment_versions_deployment_version', ['deploymentId', 'version'])
export class DeploymentVersion {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'deployment_id', type: 'uuid' })
  deploymentId!: string;

  @ManyToOne(() => Deployment, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'deployment_id', foreignKeyConstraintName: 'fk_deployment_versions_deployment' })
  deployment?: Relation<Deployment>;

  @Column({ name: 'version', type: 'integer' })
  version!: number;

  /** The validated deploy spec as submitted; its class lives with the gateway's contracts. */
  @Column({ name: 'spec', type: 'jsonb' })
  spec!: Record<string, unknown>;

  /** How many containers the scheduler should run; set from the autoscaler's scale commands. */
  @Column({ name: 'desired_containers', type: 'integer', default: 0 })
  desiredContainers!: number;

  @Column({ name: 'desired_reason', type: 'text', nullable: true })
  desiredReason!: string | null;

  @Column({ name: 'desired_at', type: 'timestamptz', nullable: true })
  desiredAt!: Date | null;

  /** Why desired is not met ("no ready machine in pool gpu with gpu A100"); null when it is. */
  @Column({ name: 'placement_reason', type: 'text', nullable: true })
  placementReason!: string | null;

  /** From the latest scale command: the containers idle past keep-warm, the only ones scale-down may stop. */
  @Column({ name: 'idle_containers', type: 'text', array: true, default: () => "'{}'" })
  idleContainers!: string[];

  /** Containers of the version that crashed in a row (CrashLoopsRepository); the scheduler backs off on it. */
  @Column({ name: 'crash_count', type: 'integer', default: 0 })
  crashCount!: number;

  @Column({ name: 'last_crash_at', type: 'timestamptz', nullable: true })
  lastCrashAt!: Date | null;

  /** The last crash: exit code, error, last log lines (CrashView). */
  @Column({ name: 'last_crash', type: 'jsonb', nullable: true })
  lastCrash!: Record<string, unknown> | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
