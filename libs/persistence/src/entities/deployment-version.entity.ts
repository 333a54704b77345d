import {
  Column,
  CreateDateColumn,
  Entity,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
  type Relation,
  Unique,
} from 'typeorm';
import { Deployment } from './deployment.entity.js';

/**
 * One immutable revision of a deployment's spec. Containers point at a version, not at the
 * deployment, so a rollout can tell old containers from new ones.
 */
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

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
