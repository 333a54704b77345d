import { type Account, decode, encodeAccount } from '@nats-io/jwt';
import { type NatsConnection } from '@nats-io/transport-node';
import { keyPair } from './installation.js';
import { type AccountSigner } from './users.js';

const TIMEOUT_MS = 5000;

/**
 * Revokes users of the Tern account at once: reads the account's current JWT from the server's
 * resolver, adds the users' public keys to its revocation list (every JWT issued for them up to
 * now stops working), re-signs it with the operator's signing key and pushes it through the
 * system account ($SYS.REQ.ACCOUNT.<id>.CLAIMS.UPDATE). The server disconnects their
 * connections and refuses them from then on; the `full` resolver keeps the update on disk.
 * `system` is a connection as a user of the system account.
 */
export async function revokeUsers(system: NatsConnection, signer: AccountSigner, publicKeys: string[]): Promise<void> {
  if (!signer.operatorSigningKey) throw new Error('the account signer has no operator signing key: it cannot revoke users');
  const lookup = await system.request(`$SYS.REQ.ACCOUNT.${signer.account}.CLAIMS.LOOKUP`, '', { timeout: TIMEOUT_MS });
  const current = decode<Account>(lookup.string());
  const at = Math.floor(Date.now() / 1000);
  const revocations = { ...(current.nats.revocations ?? {}) };
  for (const k of publicKeys) revocations[k] = at;
  const jwt = await encodeAccount(
    current.name,
    signer.account,
    { ...current.nats, revocations },
    { signer: keyPair(signer.operatorSigningKey) },
  );
  const reply = await system.request(`$SYS.REQ.ACCOUNT.${signer.account}.CLAIMS.UPDATE`, jwt, { timeout: TIMEOUT_MS });
  const answer = reply.json<{ error?: { description?: string }; data?: { code?: number } }>();
  if (answer.error) throw new Error(`NATS refused the account update: ${answer.error.description ?? JSON.stringify(answer.error)}`);
}
