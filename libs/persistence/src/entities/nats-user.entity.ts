import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn, type Relation, Unique } from 'typeorm';
import { Workspace } from './workspace.entity.js';

/**
 * An integrator's NATS user (`tern nats user create`): one workspace, the scopes it was given
 * (`events`, `submit`), and the public key its JWT was signed for (the seed stays with the
 * integrator). Revoking puts the key on the account's revocation list; the row stays as a record.
 */
@Entity({ name: 'nats_users' })
@Unique('uq_nats_users_public_key', ['publicKey'])
@Index('ix_nats_users_workspace', ['workspaceId'])
export class NatsUser {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'workspace_id', type: 'uuid' })
  workspaceId!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_nats_users_workspace' })
  workspace?: Relation<Workspace>;

  @Column({ name: 'name', type: 'text' })
  name!: string;

  @Column({ name: 'public_key', type: 'text' })
  publicKey!: string;

  @Column({ name: 'scopes', type: 'text', array: true })
  scopes!: string[];

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt!: Date | null;
}
