import {
  Check,
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
import { type MachineState, type VerificationState } from '#tern/contracts';
import { numberFromText } from '../column-transformers.js';
import { Pool } from './pool.entity.js';

/** One GPU as the agent discovered it. */
export interface MachineGpu {
  readonly index: number;
  readonly model: string;
  readonly memoryBytes: number;
  readonly vendor?: string;
  readonly driverVersion?: string;
  readonly cudaVersion?: string;
  readonly uuid?: string;
}

export interface MachineNetworkInterface {
  readonly name: string;
  readonly mac?: string;
  readonly addresses: string[];
  readonly speedMbps: number | null;
}

/** One leg of the agent's network test (machine.network-tested). */
export interface MachineNetworkPath {
  readonly throughputMbps: number;
  readonly latencyMs: number;
  readonly error?: string;
}

/** The latest network test; pool admission compares the slower leg with the pool minimum. */
export interface MachineNetworkTest {
  readonly nats: MachineNetworkPath;
  readonly http: MachineNetworkPath;
  readonly testedAt: string;
}

/** Interfaces from registration, the test from machine.network-tested; either may be missing. */
export interface MachineNetwork {
  readonly interfaces?: MachineNetworkInterface[];
  readonly test?: MachineNetworkTest;
}

export interface MachineDisk {
  readonly mount: string;
  readonly fsType: string;
  readonly sizeBytes: number;
  readonly freeBytes: number;
}

export interface MachineOs {
  readonly platform: string;
  readonly distro: string;
  readonly release: string;
  readonly kernel: string;
  readonly arch: string;
}

/**
 * A worker that runs an agent. The row is created before the agent exists (machine create
 * issues a join token), so everything the agent discovers is nullable until it registers.
 */
@Entity({ name: 'machines' })
@Check('ck_machines_verification', "verification IN ('unverified', 'verified', 'quarantined')")
@Index('ix_machines_pool_state', ['pool', 'state'])
@Index('ix_machines_pool_generation', ['pool', 'id', 'generation'])
@Unique('uq_machines_join_token_hash', ['joinTokenHash'])
@Unique('uq_machines_credential_hash', ['credentialHash'])
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

  @Column({ name: 'state_changed_at', type: 'timestamptz', default: () => 'now()' })
  stateChangedAt!: Date;

  /** What the control plane believes of the hardware (libs/proof), and why: see MachineVerifier. */
  @Column({ name: 'verification', type: 'varchar', length: 16, default: 'unverified' })
  verification!: VerificationState;

  @Column({ name: 'verification_reason', type: 'text', nullable: true })
  verificationReason!: string | null;

  @Column({ name: 'verification_checked_at', type: 'timestamptz', nullable: true })
  verificationCheckedAt!: Date | null;

  /** When the next challenge is due; moved forward while one is under way. */
  @Index('ix_machines_verification_due')
  @Column({ name: 'verification_due_at', type: 'timestamptz', default: () => 'now()' })
  verificationDueAt!: Date;

  @Column({ name: 'hostname', type: 'text', nullable: true })
  hostname!: string | null;

  @Column({ name: 'cpu_model', type: 'text', nullable: true })
  cpuModel!: string | null;

  /** Physical cores. */
  @Column({ name: 'cpu_cores', type: 'integer', nullable: true })
  cpuCores!: number | null;

  /** Logical CPUs, what container millicores are measured against. */
  @Column({ name: 'cpu_threads', type: 'integer', nullable: true })
  cpuThreads!: number | null;

  @Column({ name: 'memory_bytes', type: 'bigint', nullable: true, transformer: numberFromText })
  memoryBytes!: number | null;

  @Column({ name: 'gpus', type: 'jsonb', default: () => "'[]'" })
  gpus!: MachineGpu[];

  @Column({ name: 'network', type: 'jsonb', nullable: true })
  network!: MachineNetwork | null;

  @Column({ name: 'disks', type: 'jsonb', default: () => "'[]'" })
  disks!: MachineDisk[];

  @Column({ name: 'os', type: 'jsonb', nullable: true })
  os!: MachineOs | null;

  /**
   * Bumped by the database whenever what placement reads of the machine changes (its state,
   * pool, size, or what its containers and sandboxes hold): see the 1765420000000 migration.
   */
  @Column({ name: 'generation', type: 'bigint', default: 0, transformer: numberFromText })
  generation!: number;

  @Column({ name: 'agent_version', type: 'text', nullable: true })
  agentVersion!: string | null;

  /**
   * sha256 of the one-time join token (see hashToken). Kept after its use (join_token_used_at)
   * so that a second use is answered "already used" rather than "unknown token".
   */
  @Column({ name: 'join_token_hash', type: 'text', nullable: true })
  joinTokenHash!: string | null;

  @Column({ name: 'join_token_expires_at', type: 'timestamptz', nullable: true })
  joinTokenExpiresAt!: Date | null;

  @Column({ name: 'join_token_used_at', type: 'timestamptz', nullable: true })
  joinTokenUsedAt!: Date | null;

  /** sha256 of the machine's long-lived token, issued when it first registers; how it registers again. */
  @Column({ name: 'credential_hash', type: 'text', nullable: true })
  credentialHash!: string | null;

  /** Public key of the machine's NATS user (operator mode): revoked when the machine goes. */
  @Column({ name: 'nats_public_key', type: 'text', nullable: true })
  natsPublicKey!: string | null;

  @Column({ name: 'registered_at', type: 'timestamptz', nullable: true })
  registeredAt!: Date | null;

  @Column({ name: 'last_heartbeat_at', type: 'timestamptz', nullable: true })
  lastHeartbeatAt!: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
