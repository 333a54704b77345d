import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, Unique } from 'typeorm';

/** A tenant: owns tokens, deployments and tasks, and is what usage is billed to. */
@Entity({ name: 'workspaces' })
@Unique('uq_workspaces_name', ['name'])
export class Workspace {
  @PrimaryGeneratedColumn('uuid', { name: 'id' })
  id!: string;

  @Column({ name: 'name', type: 'text' })
  name!: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
