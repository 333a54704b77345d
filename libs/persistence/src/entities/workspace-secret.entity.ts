import { Column, CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryColumn, type Relation } from 'typeorm';
import { Workspace } from './workspace.entity.js';

/** A workspace's named secret; `sealed` is the value encrypted by the gateway, never the value. */
@Entity({ name: 'workspace_secrets' })
export class WorkspaceSecret {
  @PrimaryColumn({ name: 'workspace_id', type: 'uuid', primaryKeyConstraintName: 'pk_workspace_secrets' })
  workspaceId!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_workspace_secrets_workspace' })
  workspace?: Relation<Workspace>;

  @PrimaryColumn({ name: 'name', type: 'text', primaryKeyConstraintName: 'pk_workspace_secrets' })
  name!: string;

  @Column({ name: 'sealed', type: 'text' })
  sealed!: string;

  /** The value's length, the one thing about it the API shows. */
  @Column({ name: 'bytes', type: 'integer' })
  bytes!: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
