import { CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryColumn, type Relation } from 'typeorm';
import { Workspace } from './workspace.entity.js';

/**
 * A workspace's claim on a code bundle. The bytes are stored once, by digest, in the `code`
 * object store; a workspace may deploy a digest only when it uploaded those bytes itself.
 */
@Entity({ name: 'code_bundles' })
export class CodeBundle {
  @PrimaryColumn({ name: 'workspace_id', type: 'uuid', primaryKeyConstraintName: 'pk_code_bundles' })
  workspaceId!: string;

  /** `sha256:<hex>`, as a spec's `code` names it. */
  @PrimaryColumn({ name: 'digest', type: 'text', primaryKeyConstraintName: 'pk_code_bundles' })
  digest!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_code_bundles_workspace' })
  workspace?: Relation<Workspace>;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
