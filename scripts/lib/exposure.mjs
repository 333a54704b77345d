import { accessSync, constants, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { UserError } from './log.mjs';
import { resolve } from 'node:path';

/** The value of `--name value` or `--name=value` in args, else undefined. */
export function optionValue(args, name) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === name) {
      const v = args[i + 1];
      if (v === undefined || v.startsWith('--')) throw new UserError(`${name} needs a value`);
      return v;
    }
    if (args[i].startsWith(`${name}=`)) return args[i].slice(name.length + 1);
  }
  return undefined;
}

const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/;

/** Addresses held by this machine's interfaces. */
function localAddresses(interfaces = networkInterfaces()) {
  return new Set(
    Object.values(interfaces)
      .flat()
      .filter(Boolean)
      .map((i) => i.address),
  );
}

/** An address as it goes in a URL (IPv6 in brackets). */
export function urlHost(address) {
  return isIP(address) === 6 ? `[${address}]` : address;
}

/**
 * Where `npm run up` binds the gateway and its private NATS, and what it tells agents. By
 * default loopback only. With `--public ADDRESS` (or TERN_PUBLIC_ADDRESS): an IP this machine
 * holds is bound as is; a name, or an address the machine does not hold (a cloud VM's public IP
 * behind NAT), binds every interface (0.0.0.0). Either way agents are handed ADDRESS, and the
 * local services reach the gateway and NATS on `localHost`.
 */
export function exposure({ args = [], env = {}, interfaces } = {}) {
  const tls = tlsFiles(args, env);
  const address = optionValue(args, '--public') ?? (env.TERN_PUBLIC_ADDRESS || undefined);
  if (address === undefined) return { address: undefined, bindHost: '127.0.0.1', localHost: '127.0.0.1', advertisedHost: '127.0.0.1', tls };
  if (!isIP(address) && !HOST_NAME.test(address)) {
    throw new UserError(`--public ${address}: not an IP address or a host name (e.g. --public 203.0.113.7 or --public tern.example.com)`);
  }
  if (isIP(address) && ['0.0.0.0', '::'].includes(address)) {
    throw new UserError(`--public ${address}: give the address other machines use to reach this one, not the wildcard`);
  }
  const held = isIP(address) && localAddresses(interfaces).has(address);
  const bindHost = held ? address : '0.0.0.0';
  // With TLS the certificate names ADDRESS, so this machine's own clients use ADDRESS too.
  return { address, bindHost, localHost: held || tls ? address : '127.0.0.1', advertisedHost: address, tls };
}

/** A readable file, as an absolute path (the services run elsewhere), or a UserError naming the option. */
function readableFile(option, path) {
  try {
    if (!statSync(path).isFile()) throw new Error('not a file');
    accessSync(path, constants.R_OK);
  } catch (e) {
    throw new UserError(`${option} ${path}: cannot be read (${e.code ?? e.message})`);
  }
  return resolve(path);
}

/**
 * `--tls-cert FILE --tls-key FILE [--tls-ca FILE]` (or TERN_TLS_CERT_FILE, TERN_TLS_KEY_FILE,
 * TERN_TLS_CA_FILE): the gateway serves HTTPS and the private NATS requires TLS with that
 * certificate, which must name the address clients use (--public ADDRESS, else 127.0.0.1). The CA
 * is what the services and the local agent trust (a certificate from a public CA needs none).
 * Undefined without them: plaintext.
 */
export function tlsFiles(args, env) {
  const cert = optionValue(args, '--tls-cert') ?? (env.TERN_TLS_CERT_FILE || undefined);
  const key = optionValue(args, '--tls-key') ?? (env.TERN_TLS_KEY_FILE || undefined);
  const ca = optionValue(args, '--tls-ca') ?? (env.TERN_TLS_CA_FILE || undefined);
  if (!cert && !key) {
    if (ca) throw new UserError('--tls-ca needs --tls-cert and --tls-key (the certificate it signed)');
    return undefined;
  }
  if (!cert || !key) throw new UserError(`${cert ? '--tls-key' : '--tls-cert'} is missing: TLS needs both the certificate and its key`);
  return {
    certFile: readableFile('--tls-cert', cert),
    keyFile: readableFile('--tls-key', key),
    ...(ca ? { caFile: readableFile('--tls-ca', ca) } : {}),
  };
}
