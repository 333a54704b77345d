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
  Unique,
} from 'typeorm';
import { Workspace } from './workspace.entity.js';

/** `operator` runs the platform (pools, machines, workspaces); `admin` and `member` belong to one workspace. */
export const API_TOKEN_ROLES = ['operator', 'admin', 'member'] as const;
export type ApiTokenRole = (typeof API_TOKEN_ROLES)[number];
/** The roles a workspace admin may give: a workspace token never becomes an operator token. */
export const WORKSPACE_TOKEN_ROLES = ['admin', 'member'] as const satisfies readonly ApiTokenRole[];

/**
 * A bearer token for the public API. Only the sha256 of the secret is stored (see hashToken),
 * so a database leak does not leak usable tokens; the prefix lets a user tell tokens apart.
 */
@Entity({ name: 'api_tokens' })
@Check('ck_api_tokens_role', "role IN ('operator', 'admin', 'member')")
@Unique('uq_api_tokens_token_hash', ['tokenHash'])
@Index('ix_api_tokens_workspace', ['workspaceId'])
export class ApiToken {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'workspace_id', type: 'uuid' })
  workspaceId!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_api_tokens_workspace' })
  workspace?: Relation<Workspace>;

  @Column({ name: 'name', type: 'text' })
  name!: string;

  @Column({ name: 'token_hash', type: 'text' })
  tokenHash!: string;

  @Column({ name: 'prefix', type: 'varchar', length: 8 })
  prefix!: string;

  @Column({ name: 'role', type: 'varchar', length: 32 })
  role!: ApiTokenRole;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt!: Date | null;

  /** After this moment the token is refused (401 saying it expired); null: it never expires. */
  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt!: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt!: Date | null;
}
