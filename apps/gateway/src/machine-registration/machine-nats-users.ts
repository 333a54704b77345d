import { Inject, Injectable, Logger } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { issueMachineJwt, issueTaskPermitJwt } from '#tern/nats-auth';
import { MachinesRepository } from '#tern/persistence';
import { NatsAccount } from '../nats-users/nats-account.js';

/** The longest a task permit lives (less when machine JWTs live less). */
export const TASK_PERMIT_TTL_SECONDS = 15 * 60;

/**
 * Each machine's own NATS user: a short-lived JWT, signed with the account's signing key
 * (NATS_ACCOUNT_SIGNER), for the public key the agent generated. Its permissions name the
 * machine's id (libs/nats-auth permissionsFor('agent')), so a machine can neither hear another
 * machine's commands nor speak for it. The key is recorded on the machine; a machine deleted, or
 * registering with another key, has the old key revoked in the account at once.
 */
@Injectable()
export class MachineNatsUsers {
  private readonly logger = new Logger('machine-nats-users');

  constructor(
    private readonly machines: MachinesRepository,
    private readonly account: NatsAccount,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  /** Whether this installation's NATS runs in operator mode (machines need a user of their own). */
  get enabled(): boolean {
    return this.account.enabled;
  }

  async issue(machineId: string, publicKey: string): Promise<string> {
    const replaced = await this.machines.replaceNatsPublicKey(machineId, publicKey);
    if (replaced) await this.revoke(machineId, replaced, 'it registered with a new key');
    const jwt = await issueMachineJwt(this.account.signer(), {
      namespace: this.config.nats.namespace,
      machineId,
      publicKey,
      expiresInSeconds: this.config.machines.natsJwtTtlSeconds,
    });
    this.logger.log({ machineId, publicKey }, `issued machine ${machineId} a NATS user for ${this.config.machines.natsJwtTtlSeconds} s`);
    return jwt;
  }

  /**
   * A task permit for one task-queue version placed on the machine (the caller checked): a JWT for
   * the key the machine registered, so revoking that key cuts its permits too. Permits live at most
   * TASK_PERMIT_TTL_SECONDS: a machine keeps a permit of a version no longer placed on it no longer.
   */
  async issueTaskPermit(
    machineId: string,
    publicKey: string,
    deploymentId: string,
    version: number,
  ): Promise<{ jwt: string; expiresAt: Date }> {
    const expiresInSeconds = Math.min(TASK_PERMIT_TTL_SECONDS, this.config.machines.natsJwtTtlSeconds);
    const jwt = await issueTaskPermitJwt(this.account.signer(), {
      namespace: this.config.nats.namespace,
      machineId,
      publicKey,
      deploymentId,
      version,
      expiresInSeconds,
    });
    return { jwt, expiresAt: new Date(Date.now() + expiresInSeconds * 1000) };
  }

  /** Revokes a machine's NATS user: its connections close and its JWTs stop working. */
  async revoke(machineId: string, publicKey: string, why: string): Promise<void> {
    if (!this.enabled) return;
    await this.account.revoke([publicKey]);
    this.logger.log({ machineId, publicKey }, `revoked the NATS user of machine ${machineId}: ${why}`);
  }
}
