import { Column, CreateDateColumn, Entity, Index, PrimaryGeneratedColumn, Unique } from 'typeorm';

/** A tenant: owns tokens, deployments and tasks, and is what usage is billed to. */
@Entity({ name: 'workspaces' })
@Unique('uq_workspaces_name', ['name'])
@Index('ix_workspaces_unpurged', ['deletedAt'], { where: 'deleted_at IS NOT NULL AND purged_at IS NULL' })
export class Workspace {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'name', type: 'text' })
  name!: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  /** When an operator deleted it: its row stays for the usage billed to it, and its name stays taken. */
  @Column({ name: 'deleted_at', type: 'timestamptz', nullable: true })
  deletedAt!: Date | null;

  /** The token whose delete it was: the purge's steps act under it, resumed or not. */
  @Column({ name: 'deleted_by', type: 'text', nullable: true })
  deletedBy!: string | null;

  /** Until when one gateway holds the purge (a lease): past it, another resumes it. */
  @Column({ name: 'purge_claimed_until', type: 'timestamptz', nullable: true })
  purgeClaimedUntil!: Date | null;

  /** When what it held was all taken; null while a purge is due (or it is not deleted). */
  @Column({ name: 'purged_at', type: 'timestamptz', nullable: true })
  purgedAt!: Date | null;
}
