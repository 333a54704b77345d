import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeAccount, encodeOperator } from '@nats-io/jwt';
import { createAccount, createOperator } from '@nats-io/nkeys';
import { nativeKeyPair } from './native-keys.js';

const text = new TextDecoder();

/** One key pair as stored: the seed is the secret, the public key names it in JWTs. */
export interface StoredKey {
  publicKey: string;
  seed: string;
}

/**
 * The operator material of one Tern installation: an operator, the system account (the server's
 * own, through which account updates such as revocations are pushed) and the Tern account,
 * whose users are the services and the machines. Users are signed with the account's signing
 * key (not its identity key), so the gateway can issue machine users without holding the key
 * that owns the account.
 */
export interface Installation {
  /** signingKey re-signs the Tern account's JWT when a machine's user is revoked (the gateway holds it). */
  operator: StoredKey & { jwt: string; signingKey: StoredKey };
  system: StoredKey & { jwt: string };
  account: StoredKey & { jwt: string; signingKey: StoredKey };
}

const ACCOUNT_NAME = 'TERN';
/** No account limits, JetStream on: the account's streams are bounded by their own configs. */
const ACCOUNT_UNLIMITED = {
  subs: -1,
  data: -1,
  payload: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
  conn: -1,
  leaf: -1,
  mem_storage: -1,
  disk_storage: -1,
  streams: -1,
  consumer: -1,
};

function pair(kp: { getPublicKey(): string; getSeed(): Uint8Array }): StoredKey {
  return { publicKey: kp.getPublicKey(), seed: text.decode(kp.getSeed()) };
}

/** A key pair from its seed, signing with Node's Ed25519 (nativeKeyPair). */
export function keyPair(seed: string) {
  return nativeKeyPair(seed);
}

/** The Tern account's first JWT, signed by the operator. */
function encodeTernAccount(inst: Pick<Installation, 'operator' | 'account'>): Promise<string> {
  return encodeAccount(
    ACCOUNT_NAME,
    keyPair(inst.account.seed),
    { limits: ACCOUNT_UNLIMITED, signing_keys: [inst.account.signingKey.publicKey] },
    { signer: keyPair(inst.operator.seed) },
  );
}

/** New keys and JWTs for an operator, its system account and the Tern account. */
export async function createInstallation(name = 'tern'): Promise<Installation> {
  const operator = createOperator();
  const system = createAccount();
  const account = createAccount();
  const signingKey = createAccount();
  const operatorSigningKey = pair(createOperator());
  const systemKey = pair(system);
  const inst = {
    operator: {
      ...pair(operator),
      signingKey: operatorSigningKey,
      jwt: await encodeOperator(name, operator, { system_account: systemKey.publicKey, signing_keys: [operatorSigningKey.publicKey] }),
    },
    system: {
      ...systemKey,
      jwt: await encodeAccount(
        'SYS',
        system,
        { limits: { subs: -1, data: -1, payload: -1, conn: -1, imports: -1, exports: -1, wildcards: true, leaf: -1 } },
        { signer: operator },
      ),
    },
    account: { ...pair(account), jwt: '', signingKey: pair(signingKey) },
  };
  inst.account.jwt = await encodeTernAccount(inst);
  return inst;
}

/** Writes a file only its owner can read (seeds, creds). */
export function writeSecret(path: string, content: string): void {
  writeFileSync(path, content, { mode: 0o600 });
  chmodSync(path, 0o600);
}

export const INSTALLATION_FILE = 'installation.json';

/** Reads the installation kept in dir, creating (and keeping, mode 600) one the first time. */
export async function ensureInstallation(dir: string): Promise<Installation> {
  const file = join(dir, INSTALLATION_FILE);
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as Installation;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const inst = await createInstallation();
  writeSecret(file, JSON.stringify(inst, null, 2));
  return inst;
}

export function saveInstallation(dir: string, inst: Installation): void {
  writeSecret(join(dir, INSTALLATION_FILE), JSON.stringify(inst, null, 2));
}

/** nats-server's max_control_line this needs; an external server must allow as much. */
export const MAX_CONTROL_LINE = 65536;
/** Seconds a client has to finish its TLS handshake with the installation's NATS. */
const TLS_HANDSHAKE_SECONDS = 5;

export interface ServerConfigOptions {
  host: string;
  port: number;
  /** JetStream store. */
  storeDir: string;
  /** Where the full resolver keeps account JWTs (updates pushed at run time land here). */
  resolverDir: string;
  serverName?: string;
  /** TLS required of every client, with this certificate and key (PEM files). */
  tls?: { certFile: string; keyFile: string };
  /**
   * A member of a cluster: its route port and the routes to the others (`nats-route://host:port`).
   * Every member needs its own serverName, and the same cluster name.
   */
  cluster?: { name: string; port: number; routes: string[] };
  /**
   * The JetStream domain of this server's JetStream (the hub's, which leaf nodes name to reach
   * it); unset: none.
   */
  jetStreamDomain?: string;
  /** Accepts leaf nodes (remote sites' servers) on this port. */
  leafPort?: number;
  /**
   * A leaf node: no JetStream of its own, one connection to the hub (any of `urls`) as a user of
   * the Tern account from this .creds file. Its clients' messages reach the hub's streams (a
   * heartbeat is stored and acknowledged as at the hub); the JetStream API itself ($JS.API.>,
   * KV, object stores) the server does not carry across, as for any JetStream-enabled account
   * whose leaf does not extend the hub's JetStream.
   */
  leafOf?: { urls: string[]; credsFile: string };
  /** Loopback-only monitoring (`/connz`, `/subsz`, `/jsz`) and Go pprof ports, for profiling (bench/agents). */
  monitor?: { httpPort: number; profPort: number };
}

/**
 * nats-server configuration for operator mode: the operator JWT, the system account, and a
 * `full` resolver preloaded with both accounts, so an updated account JWT (a revocation)
 * published to $SYS.REQ.ACCOUNT.<id>.CLAIMS.UPDATE takes effect at once. No user, no
 * password, no anonymous access: a client connects only with a user JWT the account signed.
 */
export function serverConfig(inst: Installation, opts: ServerConfigOptions): string {
  const q = (s: string) => JSON.stringify(s);
  return [
    `server_name: ${q(opts.serverName ?? 'tern')}`,
    `host: ${q(opts.host)}`,
    `port: ${opts.port}`,
    ...(opts.leafOf
      ? [
          `leafnodes: { remotes: [ { urls: [${opts.leafOf.urls.map(q).join(', ')}], credentials: ${q(opts.leafOf.credsFile)}, account: ${q(inst.account.publicKey)} } ] }`,
        ]
      : [`jetstream: { store_dir: ${q(opts.storeDir)}${opts.jetStreamDomain ? `, domain: ${q(opts.jetStreamDomain)}` : ''} }`]),
    ...(opts.cluster
      ? [
          `cluster: { name: ${q(opts.cluster.name)}, host: ${q(opts.host)}, port: ${opts.cluster.port}, routes: [${opts.cluster.routes.map(q).join(', ')}] }`,
        ]
      : []),
    ...(opts.leafPort ? [`leafnodes: { host: ${q(opts.host)}, port: ${opts.leafPort} }`] : []),
    // A user JWT with its permissions travels in the CONNECT line (the gateway's is ~11 KB).
    `max_control_line: ${MAX_CONTROL_LINE}`,
    ...(opts.monitor ? [`http: "127.0.0.1:${opts.monitor.httpPort}"`, `prof_port: ${opts.monitor.profPort}`] : []),
    // nats-server gives a client 0.5 s to finish its TLS handshake unless told: too little for an
    // agent a few hundred milliseconds away, or any client of a loaded host.
    ...(opts.tls
      ? [`tls: { cert_file: ${q(opts.tls.certFile)}, key_file: ${q(opts.tls.keyFile)}, timeout: ${TLS_HANDSHAKE_SECONDS} }`]
      : []),
    `operator: ${q(inst.operator.jwt)}`,
    `system_account: ${q(inst.system.publicKey)}`,
    `resolver: { type: full, dir: ${q(opts.resolverDir)}, allow_delete: false, interval: "2m" }`,
    'resolver_preload: {',
    `  ${inst.system.publicKey}: ${q(inst.system.jwt)}`,
    `  ${inst.account.publicKey}: ${q(inst.account.jwt)}`,
    '}',
    '',
  ].join('\n');
}
