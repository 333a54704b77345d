import {
  Column,
  CreateDateColumn,
  Entity,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryColumn,
  type Relation,
  Unique,
  UpdateDateColumn,
} from 'typeorm';
import { type MachineState } from '#tern/contracts';
import { numberFromText } from '../column-transformers.js';
import { Pool } from './pool.entity.js';

/** pending: created, agent not yet registered; registered: hardware known, not yet heartbeating; ready: schedulable. */

/** One GPU as the agent discovered it. */
export interface MachineGpu {
  readonly index: number;
  readonly model: string;
  readonly memoryBytes: number;
  readonly driverVersion?: string;
  readonly uuid?: string;
}

/** What the agent measured about its network; all optional because discovery is best effort. */
export interface MachineNetwork {
  readonly publicIp?: string;
  readonly bandwidthGbps?: number;
  readonly latencyMs?: number;
  readonly region?: string;
}

/**
 * A worker that runs an agent. The row is created before the agent exists (machine create
 * issues a join token), so everything the agent discovers is nullable until it registers.
 */
@Entity({ name: 'machines' })
@Index('ix_machines_pool_state', ['pool', 'state'])
@Unique('uq_machines_join_token_hash', ['joinTokenHash'])
export class Machine {
  /** Chosen by the agent (or by machine create), stable across agent restarts. */
  @PrimaryColumn({ name: 'id', type: 'text' })
  id!: string;

  /** The pool's name rather than its id: agents and heartbeats speak in pool names. */
  @Column({ name: 'pool', type: 'text' })
  pool!: string;

  @ManyToOne(() => Pool, { onDelete: 'RESTRICT', onUpdate: 'CASCADE' })
  @JoinColumn({ name: 'pool', referencedColumnName: 'name', foreignKeyConstraintName: 'fk_machines_pool' })
  poolRef?: Relation<Pool>;

  @Column({ name: 'state', type: 'varchar', length: 32, default: 'pending' })
  state!: MachineState;

  @Column({ name: 'state_reason', type: 'text', nullable: true })
  stateReason!: string | null;

  @Column({ name: 'hostname', type: 'text', nullable: true })
  hostname!: string | null;

  @Column({ name: 'cpu_model', type: 'text', nullable: true })
  cpuModel!: string | null;

  @Column({ name: 'cpu_cores', type: 'integer', nullable: true })
  cpuCores!: number | null;

  @Column({ name: 'memory_bytes', type: 'bigint', nullable: true, transformer: numberFromText })
  memoryBytes!: number | null;

  @Column({ name: 'gpus', type: 'jsonb', default: () => "'[]'" })
  gpus!: MachineGpu[];

  @Column({ name: 'network', type: 'jsonb', nullable: true })
  network!: MachineNetwork | null;

  @Column({ name: 'agent_version', type: 'text', nullable: true })
  agentVersion!: string | null;

  /** sha256 of the one-time join token (see hashToken); cleared once the agent has registered. */
  @Column({ name: 'join_token_hash', type: 'text', nullable: true })
  joinTokenHash!: string | null;

  @Column({ name: 'join_token_expires_at', type: 'timestamptz', nullable: true })
  joinTokenExpiresAt!: Date | null;

  @Column({ name: 'registered_at', type: 'timestamptz', nullable: true })
  registeredAt!: Date | null;

  @Column({ name: 'last_heartbeat_at', type: 'timestamptz', nullable: true })
  lastHeartbeatAt!: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}

