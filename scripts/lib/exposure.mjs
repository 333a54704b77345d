import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { UserError } from './log.mjs';

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
  const address = optionValue(args, '--public') ?? (env.TERN_PUBLIC_ADDRESS || undefined);
  if (address === undefined) return { address: undefined, bindHost: '127.0.0.1', localHost: '127.0.0.1', advertisedHost: '127.0.0.1' };
  if (!isIP(address) && !HOST_NAME.test(address)) {
    throw new UserError(`--public ${address}: not an IP address or a host name (e.g. --public 203.0.113.7 or --public tern.example.com)`);
  }
  if (isIP(address) && ['0.0.0.0', '::'].includes(address)) {
    throw new UserError(`--public ${address}: give the address other machines use to reach this one, not the wildcard`);
  }
  const held = isIP(address) && localAddresses(interfaces).has(address);
  const bindHost = held ? address : '0.0.0.0';
  return { address, bindHost, localHost: held ? address : '127.0.0.1', advertisedHost: address };
}
