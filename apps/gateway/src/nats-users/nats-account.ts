import { readFileSync } from 'node:fs';
import { Inject, Injectable } from '@nestjs/common';
import { connect, credsAuthenticator } from '@nats-io/transport-node';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { type AccountSigner, revokeUsers } from '#tern/nats-auth';

/**
 * The Tern account as the gateway holds it (NATS_ACCOUNT_SIGNER): the signing key it issues
 * users with (machines, integrators) and what it revokes them with. Without the file, NATS runs
 * without operator mode and nobody gets a user of their own.
 */
@Injectable()
export class NatsAccount {
  private loaded?: AccountSigner;

  constructor(@Inject(TERN_CONFIG) private readonly config: TernConfig) {}

  get enabled(): boolean {
    return Boolean(this.config.machines.natsAccountSigner);
  }

  signer(): AccountSigner {
    const path = this.config.machines.natsAccountSigner;
    if (!path) throw new Error('NATS_ACCOUNT_SIGNER is not set: this installation issues no NATS users');
    this.loaded ??= JSON.parse(readFileSync(path, 'utf8')) as AccountSigner;
    return this.loaded;
  }

  /** Puts the users' keys on the account's revocation list: their connections close and their JWTs stop working. */
  async revoke(publicKeys: string[]): Promise<void> {
    const signer = this.signer();
    const nc = await connect({
      servers: this.config.nats.servers,
      name: `${this.config.nats.namespace}-gateway-revoker`,
      authenticator: credsAuthenticator(new TextEncoder().encode(signer.systemUser ?? '')),
      reconnect: false,
    });
    try {
      await revokeUsers(nc, signer, publicKeys);
    } finally {
      await nc.close();
    }
  }
}
