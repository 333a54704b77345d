import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, type Relation } from 'typeorm';
import { type ContainerResources } from './container.entity.js';
import { Workspace } from './workspace.entity.js';

export const SANDBOX_STATES = ['placing', 'running', 'terminated', 'failed', 'lost'] as const;
export type SandboxState = (typeof SANDBOX_STATES)[number];
/** States in which a sandbox holds resources on its machine. */
export const SANDBOX_HOLDING_STATES: readonly SandboxState[] = ['placing', 'running'];

/**
 * A long-lived container that a workspace drives over the API (processes, files). Placed by the
 * gateway on a machine of its pool; ended by DELETE, its idle timeout or its lifetime, or lost
 * with its machine. No foreign key to machines: the row outlives a removed machine.
 */
@Entity({ name: 'sandboxes' })
@Index('ix_sandboxes_workspace_created', ['workspaceId', 'createdAt'])
@Index('ix_sandboxes_state', ['state'])
// Finds a public port's sandbox. The migration defines it as GIN over the running rows' public_ports,
// which @Index cannot express, so schema comparison is told to leave it alone.
@Index('ix_sandboxes_public_ports', { synchronize: false })
export class Sandbox {
  @PrimaryColumn({ name: 'id', type: 'text' })
  id!: string;

  @Column({ name: 'workspace_id', type: 'uuid' })
  workspaceId!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_sandboxes_workspace' })
  workspace?: Relation<Workspace>;

  @Column({ name: 'machine_id', type: 'text', nullable: true })
  machineId!: string | null;

  @Column({ name: 'pool', type: 'text' })
  pool!: string;

  @Column({ name: 'state', type: 'varchar', length: 32 })
  state!: SandboxState;

  @Column({ name: 'state_reason', type: 'text', nullable: true })
  stateReason!: string | null;

  /** What it was created with: image, env, workdir, network (the API's spec, resolved). */
  @Column({ name: 'spec', type: 'jsonb' })
  spec!: Record<string, unknown>;

  @Column({ name: 'requested', type: 'jsonb' })
  requested!: ContainerResources;

  @Column({ name: 'timeout_seconds', type: 'integer' })
  timeoutSeconds!: number;

  @Column({ name: 'idle_timeout_seconds', type: 'integer', nullable: true })
  idleTimeoutSeconds!: number | null;

  /** Ports exposed through the gateway (`/sandbox/<id>/<port>/…`). */
  @Column({ name: 'ports', type: 'integer', array: true, default: () => "'{}'" })
  ports!: number[];

  /** Ports reached without a token at `/sandbox-public/<token>/…`: `{<token>: <port>}`. */
  @Column({ name: 'public_ports', type: 'jsonb', default: () => "'{}'" })
  publicPorts!: Record<string, number>;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt!: Date | null;

  /** The last call through the API or keepalive: the idle timeout counts from here. */
  @Column({ name: 'active_at', type: 'timestamptz', default: () => 'now()' })
  activeAt!: Date;

  @Column({ name: 'ended_at', type: 'timestamptz', nullable: true })
  endedAt!: Date | null;
}
