import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { CodeBundle } from '../entities/code-bundle.entity.js';

/** Every statement on which workspace uploaded which code bundle. */
@Injectable()
export class CodeBundlesRepository {
  constructor(private readonly db: DataSource) {}

  /** The workspace uploaded the bundle (again: nothing changes). */
  async record(workspaceId: string, digest: string): Promise<void> {
    await this.db.createQueryBuilder().insert().into(CodeBundle).values({ workspaceId, digest }).orIgnore().execute();
  }

  /** Whether the workspace uploaded the bundle; another workspace's upload does not count. */
  isOwnedBy(workspaceId: string, digest: string): Promise<boolean> {
    return this.db.getRepository(CodeBundle).existsBy({ workspaceId, digest });
  }
}
