import {
  Column,
  CreateDateColumn,
  Entity,
  JoinColumn,
  ManyToOne,
  PrimaryColumn,
  PrimaryGeneratedColumn,
  type Relation,
  Unique,
} from 'typeorm';
import { Workspace } from './workspace.entity.js';

/** A workspace's named file tree; `version` counts its commits (puts and rms included). */
@Entity({ name: 'volumes' })
@Unique('uq_volumes_workspace_name', ['workspaceId', 'name'])
export class Volume {
  @PrimaryGeneratedColumn('uuid', { name: 'id', primaryKeyConstraintName: 'pk_volumes' })
  id!: string;

  @Column({ name: 'workspace_id', type: 'uuid' })
  workspaceId!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_volumes_workspace' })
  workspace?: Relation<Workspace>;

  @Column({ name: 'name', type: 'text' })
  name!: string;

  @Column({ name: 'version', type: 'integer', default: 0 })
  version!: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}

/** One manifest entry: a file of a volume as the chunks (sha256 hex, in order) that make it up. */
@Entity({ name: 'volume_files' })
export class VolumeFile {
  @PrimaryColumn({ name: 'volume_id', type: 'uuid', primaryKeyConstraintName: 'pk_volume_files' })
  volumeId!: string;

  @ManyToOne(() => Volume, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'volume_id', foreignKeyConstraintName: 'fk_volume_files_volume' })
  volume?: Relation<Volume>;

  @PrimaryColumn({ name: 'path', type: 'text', primaryKeyConstraintName: 'pk_volume_files' })
  path!: string;

  @Column({ name: 'size', type: 'bigint' })
  size!: string;

  @Column({ name: 'mode', type: 'integer' })
  mode!: number;

  @Column({ name: 'mtime', type: 'timestamptz' })
  mtime!: Date;

  @Column({ name: 'chunks', type: 'text', array: true })
  chunks!: string[];

  /** The volume version that last wrote the file. */
  @Column({ name: 'version', type: 'integer' })
  version!: number;
}

/** A chunk stored for a workspace (once, whatever holds it): quotas count these, the sweeper removes unheld ones. */
@Entity({ name: 'volume_chunks' })
export class VolumeChunk {
  @PrimaryColumn({ name: 'workspace_id', type: 'uuid', primaryKeyConstraintName: 'pk_volume_chunks' })
  workspaceId!: string;

  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'workspace_id', foreignKeyConstraintName: 'fk_volume_chunks_workspace' })
  workspace?: Relation<Workspace>;

  @PrimaryColumn({ name: 'digest', type: 'text', primaryKeyConstraintName: 'pk_volume_chunks' })
  digest!: string;

  @Column({ name: 'size', type: 'integer' })
  size!: number;

  @Column({ name: 'touched_at', type: 'timestamptz', default: () => 'now()' })
  touchedAt!: Date;
}
