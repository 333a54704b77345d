import { isIPv4 } from 'node:net';

/** An IPv4 network: its first address as a 32-bit number and its prefix length. */
export interface Ipv4Net {
  base: number;
  prefix: number;
}

export function ipToInt(ip: string): number {
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

export function intToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/**
 * `a.b.c.d/n` (a bare address is /32) → the network, or a sentence saying what is wrong: not
 * IPv4, a prefix outside 0-32, or host bits set (`10.0.0.1/8` names no network; `10.0.0.0/8` does).
 */
export function parseIpv4Cidr(cidr: string): Ipv4Net | string {
  const [ip, prefixText, extra] = String(cidr).split('/');
  if (extra !== undefined || !isIPv4(ip ?? '')) return `"${cidr}" is not an IPv4 address or CIDR such as 203.0.113.0/24`;
  const prefix = prefixText === undefined ? 32 : /^\d{1,2}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefix >= 0 && prefix <= 32)) return `"${cidr}" has a prefix length outside 0-32`;
  const base = ipToInt(ip);
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  if ((base & mask) >>> 0 !== base) return `"${cidr}" has host bits set: the network is ${intToIp((base & mask) >>> 0)}/${prefix}`;
  return { base, prefix };
}

export function netSize(net: Ipv4Net): number {
  return 2 ** (32 - net.prefix);
}

export function formatNet(net: Ipv4Net): string {
  return `${intToIp(net.base)}/${net.prefix}`;
}

/**
 * Destinations a container never reaches, whatever its deployment allows: "this" network, the
 * private ranges (RFC 1918), shared address space (100.64/10, carrier NAT), loopback, link-local
 * (169.254/16, where cloud metadata services answer), IETF protocol assignments, benchmarking,
 * multicast and the reserved/broadcast block. The documentation ranges (192.0.2/24,
 * 198.51.100/24, 203.0.113/24) are left out: no one routes them on the internet, and tests use
 * them to stand for it.
 */
export const NEVER_REACHED: readonly string[] = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
];
