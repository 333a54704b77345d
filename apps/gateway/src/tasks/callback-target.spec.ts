import { callbackAddressCheck } from './callback-target.js';

describe('callbackAddressCheck', () => {
  const check = callbackAddressCheck(['198.51.100.7', '2001:db8::7']);

  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.8.9.10', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['10.1.2.3', 'RFC 1918'],
    ['172.20.0.1', 'RFC 1918'],
    ['192.168.1.1', 'RFC 1918'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fd12:3456::1', 'unique local'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['0.0.0.0', 'this network'],
    ['224.0.0.1', 'multicast'],
    ['198.51.100.7', 'control plane'],
    ['2001:DB8::7', 'control plane'],
  ])('refuses %s (%s)', (address, why) => {
    expect(check(address)).toContain(why);
  });

  it.each(['203.0.113.10', '8.8.8.8', '2606:4700::1111', '172.32.0.1', '192.169.0.1'])('allows the public address %s', (address) => {
    expect(check(address)).toBeUndefined();
  });
});
