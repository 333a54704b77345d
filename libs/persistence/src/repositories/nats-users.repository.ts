import { Injectable } from '@nestjs/common';
import { DataSource, IsNull } from 'typeorm';
import { NatsUser } from '../entities/nats-user.entity.js';

/** The id is the caller's: the user's JWT (its inbox) names it, and is signed before the row is written. */
export type NewNatsUser = Pick<NatsUser, 'id' | 'workspaceId' | 'name' | 'publicKey' | 'scopes'>;

/** Every statement on integrators' NATS users. */
@Injectable()
export class NatsUsersRepository {
  constructor(private readonly db: DataSource) {}

  /** Rejects a key already recorded with the unique violation uq_nats_users_public_key. */
  record(user: NewNatsUser): Promise<NatsUser> {
    const users = this.db.getRepository(NatsUser);
    return users.save(users.create(user));
  }

  /** The users of a workspace (all workspaces when undefined), revoked ones included, oldest first. */
  list(workspaceId: string | undefined): Promise<NatsUser[]> {
    return this.db.getRepository(NatsUser).find({ where: workspaceId ? { workspaceId } : {}, order: { createdAt: 'ASC' } });
  }

  findById(id: string): Promise<NatsUser | null> {
    return this.db.getRepository(NatsUser).findOneBy({ id });
  }

  /** The workspace's users not revoked. */
  activeOf(workspaceId: string): Promise<NatsUser[]> {
    return this.db.getRepository(NatsUser).findBy({ workspaceId, revokedAt: IsNull() });
  }

  async markRevoked(id: string): Promise<void> {
    await this.db.getRepository(NatsUser).update(id, { revokedAt: new Date() });
  }
}
