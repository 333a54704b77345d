import { readFileSync } from 'node:fs';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { type AccountSigner, issueMachineJwt } from '#tern/nats-auth';

/**
 * Issues each machine its own NATS user: a short-lived JWT, signed with the account's signing
 * key (NATS_ACCOUNT_SIGNER), for the public key the agent generated. Its permissions name the
 * machine's id (libs/nats-auth permissionsFor('agent')), so a machine can neither hear another
 * machine's commands nor speak for it.
 */
@Injectable()
export class MachineNatsUsers {
  private signer?: AccountSigner;
  private readonly logger = new Logger('machine-nats-users');

  constructor(@Inject(TERN_CONFIG) private readonly config: TernConfig) {}

  /** Whether this installation's NATS runs in operator mode (machines need a user of their own). */
  get enabled(): boolean {
    return Boolean(this.config.machines.natsAccountSigner);
  }

  async issue(machineId: string, publicKey: string): Promise<string> {
    const jwt = await issueMachineJwt(this.load(), {
      namespace: this.config.nats.namespace,
      machineId,
      publicKey,
      expiresInSeconds: this.config.machines.natsJwtTtlSeconds,
    });
    this.logger.log({ machineId, publicKey }, `issued machine ${machineId} a NATS user for ${this.config.machines.natsJwtTtlSeconds} s`);
    return jwt;
  }

  private load(): AccountSigner {
    const path = this.config.machines.natsAccountSigner!;
    this.signer ??= JSON.parse(readFileSync(path, 'utf8')) as AccountSigner;
    return this.signer;
  }
}
