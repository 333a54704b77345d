import { randomUUID } from 'node:crypto';
import {
  BadRequestException,
  ConflictException,
  ForbiddenException,
  Inject,
  Injectable,
  Logger,
  NotFoundException,
  ServiceUnavailableException,
} from '@nestjs/common';
import { NKeysError } from '@nats-io/nkeys';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import type { CreatedNatsUser, IntegratorScope, NatsUserView } from '#tern/contracts';
import { integratorInbox, issueIntegratorJwt } from '#tern/nats-auth';
import { isUniqueViolation, type NatsUser, NatsUsersRepository, TokensRepository } from '#tern/persistence';
import type { Principal } from '../auth/principal.js';
import type { CreateNatsUserDto } from './dto/create-nats-user.dto.js';
import { NatsAccount } from './nats-account.js';

/**
 * Integrators' NATS users: a user JWT signed with the account's signing key for a public key
 * the integrator made, whose permissions cover one workspace's task events and task submission
 * (libs/nats-auth integratorPermissions), and its revocation through the account's revocation
 * list. An operator acts for any workspace, a workspace's admin for its own only.
 */
@Injectable()
export class NatsUsersService {
  private readonly logger = new Logger('nats-users');

  constructor(
    private readonly users: NatsUsersRepository,
    private readonly workspaces: TokensRepository,
    private readonly account: NatsAccount,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  async create(p: Principal, body: CreateNatsUserDto): Promise<CreatedNatsUser> {
    this.requireOperatorMode();
    const workspaceId = this.workspaceFor(p, body.workspace);
    if (!(await this.workspaces.findWorkspace(workspaceId))) throw new NotFoundException(`workspace ${workspaceId} not found`);
    // Signed before the row is written: a key the signer refuses leaves no user behind.
    const userId = randomUUID();
    const namespace = this.config.nats.namespace;
    const jwt = await issueIntegratorJwt(this.account.signer(), {
      namespace,
      workspaceId,
      userId,
      scopes: body.allow,
      name: body.name,
      publicKey: body.publicKey,
    }).catch((e: Error) => {
      // The body's validation refuses a malformed key first; one nkeys still refuses is the caller's to fix too.
      if (e instanceof NKeysError) throw new BadRequestException(`publicKey is not a user public key nkeys accepts (${e.message})`);
      throw e;
    });
    let user: NatsUser;
    try {
      user = await this.users.record({ id: userId, workspaceId, name: body.name, publicKey: body.publicKey, scopes: [...body.allow] });
    } catch (e) {
      if (isUniqueViolation(e)) throw new ConflictException('this public key has a NATS user already: make a new key pair for each user');
      throw e;
    }
    this.logger.log({ userId: user.id, workspaceId, scopes: body.allow }, `issued integrator NATS user ${body.name}`);
    return {
      ...view(user),
      jwt,
      servers: this.config.machines.natsPublicUrls,
      namespace,
      inboxPrefix: integratorInbox(namespace, user.id),
    };
  }

  async list(p: Principal, workspace: string | undefined): Promise<NatsUserView[]> {
    return (await this.users.list(this.workspaceFor(p, workspace))).map(view);
  }

  /** Revokes at once: the key goes on the account's revocation list, so its connections close. */
  async revoke(p: Principal, id: string): Promise<void> {
    this.requireOperatorMode();
    const user = await this.users.findById(id);
    if (!user || (p.role !== 'operator' && user.workspaceId !== p.workspaceId))
      throw new NotFoundException(`NATS user ${id} not found in this workspace`);
    if (user.revokedAt) throw new ConflictException(`NATS user ${id} was revoked already (${user.revokedAt.toISOString()})`);
    await this.account.revoke([user.publicKey]);
    await this.users.markRevoked(user.id);
    this.logger.log({ userId: user.id, workspaceId: user.workspaceId }, `revoked integrator NATS user ${user.name}`);
  }

  /** A deleted workspace's users, all revoked at once (one revocation-list update); answers how many. */
  async revokeAllOf(workspaceId: string): Promise<number> {
    const users = await this.users.activeOf(workspaceId);
    if (!users.length) return 0;
    // Without operator mode no user JWT could have been issued since: the rows are what is left.
    if (this.account.enabled) await this.account.revoke(users.map((u) => u.publicKey));
    for (const u of users) await this.users.markRevoked(u.id);
    this.logger.log({ workspaceId, users: users.length }, `revoked the ${users.length} NATS user(s) of a deleted workspace`);
    return users.length;
  }

  private workspaceFor(p: Principal, workspace: string | undefined): string {
    if (!workspace || workspace === p.workspaceId) return p.workspaceId;
    if (p.role !== 'operator')
      throw new ForbiddenException("this action needs an operator token: a workspace admin manages its own workspace's NATS users only");
    return workspace;
  }

  private requireOperatorMode(): void {
    if (!this.account.enabled)
      throw new ServiceUnavailableException(
        'this installation issues no NATS users: set NATS_ACCOUNT_SIGNER (npm run up writes .tern/nats/signer.json) to run NATS in operator mode',
      );
  }
}

export function view(u: NatsUser): NatsUserView {
  return {
    id: u.id,
    name: u.name,
    workspaceId: u.workspaceId,
    scopes: u.scopes as IntegratorScope[],
    publicKey: u.publicKey,
    createdAt: u.createdAt.toISOString(),
    revokedAt: u.revokedAt ? u.revokedAt.toISOString() : null,
  };
}
