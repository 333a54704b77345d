import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * Where a task's callback may go: the public internet only. A callback_url is the user's, and
 * the gateway POSTs to it from inside the control plane, so without this a user could make it
 * call the host itself, the cloud metadata service, Postgres or NATS on a private address
 * (server-side request forgery). The address is checked when the connection is made (the one
 * DNS answer that is used, so a name that changes its answer between a check and the call
 * gains nothing), and redirects are not followed.
 */
const PRIVATE_RANGES: [string, number, 'ipv4' | 'ipv6', string][] = [
  ['0.0.0.0', 8, 'ipv4', 'a "this network" address'],
  ['127.0.0.0', 8, 'ipv4', 'a loopback address'],
  ['10.0.0.0', 8, 'ipv4', 'a private (RFC 1918) address'],
  ['172.16.0.0', 12, 'ipv4', 'a private (RFC 1918) address'],
  ['192.168.0.0', 16, 'ipv4', 'a private (RFC 1918) address'],
  ['100.64.0.0', 10, 'ipv4', 'a carrier-grade NAT address'],
  ['169.254.0.0', 16, 'ipv4', 'a link-local address (the cloud metadata service lives there)'],
  ['192.0.0.0', 24, 'ipv4', 'an IETF protocol address'],
  ['198.18.0.0', 15, 'ipv4', 'a benchmarking address'],
  ['224.0.0.0', 4, 'ipv4', 'a multicast address'],
  ['240.0.0.0', 4, 'ipv4', 'a reserved address'],
  ['::', 128, 'ipv6', 'the unspecified address'],
  ['::1', 128, 'ipv6', 'a loopback address'],
  ['fc00::', 7, 'ipv6', 'a private (unique local) address'],
  ['fe80::', 10, 'ipv6', 'a link-local address'],
  ['ff00::', 8, 'ipv6', 'a multicast address'],
];

/** Why an address may not be called back, or undefined when it may. */
export type AddressCheck = (address: string) => string | undefined;

/**
 * The addresses callbacks may not reach: private, loopback, link-local and reserved ranges, and
 * every address of this host (the control plane's own, whatever range it is in).
 */
export function callbackAddressCheck(ownAddresses: string[] = hostAddresses()): AddressCheck {
  const ranges = PRIVATE_RANGES.map(([network, prefix, family, why]) => {
    const list = new BlockList();
    list.addSubnet(network, prefix, family);
    return { list, why };
  });
  const own = new Set(ownAddresses.map(normalise));
  return (raw) => {
    const address = normalise(raw);
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    for (const { list, why } of ranges) if (list.check(address, family)) return `${address} is ${why}`;
    if (own.has(address)) return `${address} is an address of the control plane`;
    return undefined;
  };
}

/** An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is its IPv4 address. */
function normalise(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1] : address.toLowerCase();
}

function hostAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .map((i) => i?.address)
    .filter((a): a is string => !!a);
}

/** A refused destination: the callback is given up at once (no retry can make it allowed). */
export class CallbackTargetRefused extends Error {}

export interface CallbackAnswer {
  status: number;
}

/**
 * POSTs a JSON body to a callback URL if its address is allowed; rejects with
 * CallbackTargetRefused when it is not (before any byte is sent) and answers redirects as they
 * are (3xx), without following them.
 */
export function postCallback(
  url: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
  check: AddressCheck,
): Promise<CallbackAnswer> {
  const target = new URL(url);
  if (target.protocol !== 'http:' && target.protocol !== 'https:') {
    return Promise.reject(new CallbackTargetRefused(`callback_url must be http or https, not ${target.protocol}`));
  }
  const host = target.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    const why = check(host);
    if (why) return Promise.reject(new CallbackTargetRefused(`callback_url refused: ${why}; callbacks go only to public addresses`));
  }
  const lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, answers: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      const refused = answers.map((a) => check(a.address)).find((why) => why);
      if (refused)
        return callback(
          new CallbackTargetRefused(`callback_url refused: ${hostname} resolves to ${refused}; callbacks go only to public addresses`),
          '',
          0,
        );
      const first = answers[0];
      if (options.all) (callback as unknown as (e: null, all: LookupAddress[]) => void)(null, answers);
      else callback(null, first.address, first.family);
    });
  };
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      target,
      { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, lookup, timeout: timeoutMs },
      (res: IncomingMessage) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
