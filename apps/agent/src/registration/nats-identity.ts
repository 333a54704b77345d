import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatCreds, keyPair, newUserKey, writeSecret } from '#tern/nats-auth';

/**
 * The machine's NATS identity: an nkey pair generated here, whose seed never leaves the machine
 * (nats.nk, mode 600). The gateway signs a short-lived user JWT for its public key at every
 * registration; the JWT and the seed make nats.creds, which the NATS connection reads again at
 * every reconnection, so a renewed JWT is picked up without restarting anything.
 */
export class MachineNatsIdentity {
  readonly publicKey: string;
  private readonly seed: string;

  constructor(private readonly stateDir: string) {
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    const keyFile = join(stateDir, 'nats.nk');
    if (existsSync(keyFile)) {
      this.seed = readFileSync(keyFile, 'utf8').trim();
    } else {
      this.seed = newUserKey().seed;
      writeSecret(keyFile, `${this.seed}\n`);
    }
    this.publicKey = keyPair(this.seed).getPublicKey();
  }

  get credsFile(): string {
    return join(this.stateDir, 'nats.creds');
  }

  /** Keeps the JWT the gateway issued, with the seed, where the connection reads it. */
  keep(jwt: string): string {
    writeSecret(this.credsFile, this.creds(jwt));
    return this.credsFile;
  }

  /** The `.creds` text of a JWT issued for this key (task permits keep theirs in memory only). */
  creds(jwt: string): string {
    return formatCreds(jwt, this.seed);
  }
}
