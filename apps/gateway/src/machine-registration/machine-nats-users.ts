import { Inject, Injectable, Logger } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { issueMachineJwt } from '#tern/nats-auth';
import { MachinesRepository } from '#tern/persistence';
import { NatsAccount } from '../nats-users/nats-account.js';

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

  /** Revokes a machine's NATS user: its connections close and its JWTs stop working. */
  async revoke(machineId: string, publicKey: string, why: string): Promise<void> {
    if (!this.enabled) return;
    await this.account.revoke([publicKey]);
    this.logger.log({ machineId, publicKey }, `revoked the NATS user of machine ${machineId}: ${why}`);
  }
}
