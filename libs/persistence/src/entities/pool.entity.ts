import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, Unique } from 'typeorm';

/** The pool every agent joins unless told otherwise (POOL defaults to it); the initial migration creates it. */
export const DEFAULT_POOL = 'default';

/** A named group of machines with admission rules; deployments ask for a pool. */
@Entity({ name: 'pools' })
@Unique('uq_pools_name', ['name'])
export class Pool {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'name', type: 'text' })
  name!: string;

  /** GPU models a machine may bring into the pool; empty admits any machine, CPU-only included. */
  @Column({ name: 'allowed_gpu_types', type: 'text', array: true, default: () => "'{}'" })
  allowedGpuTypes!: string[];

  /** Lowest measured network throughput (Mbit/s) a machine needs to be schedulable; null: no minimum. */
  @Column({ name: 'min_network_mbps', type: 'integer', nullable: true })
  minNetworkMbps!: number | null;

  /** Lowest reputation a machine needs to get new containers (with a deployment's min_reputation, the stricter applies); null: none. */
  @Column({ name: 'min_reputation', type: 'double precision', nullable: true })
  minReputation!: number | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
