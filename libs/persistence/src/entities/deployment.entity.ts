import {
  Column,
  CreateDateColumn,
  Entity,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
  type Relation,
  Unique,
  UpdateDateColumn,
} from 'typeorm';
import { type DeploymentKind, type DeploymentState } from '#tern/contracts';
import { Workspace } from './workspace.entity.js';

/** A named workload in a workspace; its spec lives in immutable DeploymentVersion rows. */
@Entity({ name: 'deployments' })
@Unique('uq_deployments_workspace_name', ['workspaceId', 'name'])
export class Deployment {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'workspace_id', type: 'uuid' })
  workspaceId!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_deployments_workspace' })
  workspace?: Relation<Workspace>;

  @Column({ name: 'name', type: 'text' })
  name!: string;

  @Column({ name: 'kind', type: 'varchar', length: 32 })
  kind!: DeploymentKind;

  @Column({ name: 'state', type: 'varchar', length: 32, default: 'pending' })
  state!: DeploymentState;

  @Column({ name: 'state_reason', type: 'text', nullable: true })
  stateReason!: string | null;

  /** 0 until the first version is written; bumped in the same transaction as the new version. */
  @Column({ name: 'latest_version', type: 'integer', default: 0 })
  latestVersion!: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
