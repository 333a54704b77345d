import { type EgressNetwork, egressRuleset } from './egress-ruleset.js';
import { parseIpv4Cidr, type Ipv4Net } from './ipv4.js';

const net: EgressNetwork = {
  table: 'tern_tb1',
  bridge: 'tb1',
  subnet: parseIpv4Cidr('10.213.0.0/16') as Ipv4Net,
  gateway: '10.213.0.1',
  blocked: ['10.0.0.0/8', '192.0.2.7/32'],
  dns: true,
};
const open = (address: string) => ({ address, egress: {} });
/** The rules of one chain of the inet table, indentation dropped. */
function chain(script: string, name: string): string[] {
  const lines = script.split('\n');
  const from = lines.indexOf(`  chain ${name} {`);
  expect(from).toBeGreaterThan(-1);
  return lines.slice(from + 1, lines.indexOf('  }', from)).map((l) => l.trim());
}

describe('egressRuleset', () => {
  it('replaces both tables whole: declared, deleted, then written again', () => {
    const lines = egressRuleset(net, []).split('\n');
    expect(lines.slice(0, 3)).toEqual(['table inet tern_tb1 {}', 'delete table inet tern_tb1', 'table inet tern_tb1 {']);
    expect(lines).toEqual(expect.arrayContaining(['table bridge tern_tb1 {}', 'delete table bridge tern_tb1', 'table bridge tern_tb1 {']));
  });

  it('keeps containers off the host: new connections from the bridge dropped on input, answers let back', () => {
    expect(chain(egressRuleset(net, []), 'input')).toEqual([
      'type filter hook input priority filter - 5; policy accept;',
      'iifname != "tb1" ip daddr 10.213.0.1 udp dport 53 drop',
      'iifname != "tb1" ip daddr 10.213.0.1 tcp dport 53 drop',
      'iifname "tb1" ct state established,related accept',
      'iifname "tb1" ip daddr 10.213.0.1 udp dport 53 accept',
      'iifname "tb1" ip daddr 10.213.0.1 tcp dport 53 accept',
      'iifname "tb1" drop',
    ]);
  });

  it('opens no DNS port without the forwarder', () => {
    const input = chain(egressRuleset({ ...net, dns: false }, []), 'input');
    expect(input.filter((l) => l.includes('dport 53'))).toEqual([]);
    expect(input.at(-1)).toBe('iifname "tb1" drop');
  });

  it('lets nothing forwarded reach a container unless it answers the container', () => {
    expect(chain(egressRuleset(net, []), 'forward')).toEqual([
      'type filter hook forward priority filter - 5; policy accept;',
      'iifname "tb1" jump from_containers',
      'oifname "tb1" ct state established,related accept',
      'oifname "tb1" drop',
    ]);
  });

  it('drops IPv6, spoofed sources and the never-reached set for every container', () => {
    const script = egressRuleset(net, [open('10.213.0.5')]);
    expect(script).toContain('    elements = { 10.0.0.0/8, 192.0.2.7/32 }');
    expect(chain(script, 'from_containers')).toEqual([
      'meta nfproto ipv6 drop',
      'ip saddr != 10.213.0.0/16 drop',
      'ip daddr @never_reached drop',
      'accept',
    ]);
  });

  it('narrows egress per container, in address order: block drops all, allow drops what is outside it', () => {
    const script = egressRuleset(net, [
      { address: '10.213.0.20', egress: { allow: ['203.0.113.0/24', 'not a cidr', '198.51.100.9'] } },
      { address: '10.213.0.3', egress: { block: true } },
      open('10.213.0.4'),
      { address: '10.213.0.9', egress: { allow: [] } },
    ]);
    expect(chain(script, 'from_containers').slice(3, -1)).toEqual([
      'ip saddr 10.213.0.3 drop',
      'ip saddr 10.213.0.9 drop',
      'ip saddr 10.213.0.20 ip daddr != { 203.0.113.0/24, 198.51.100.9/32 } drop',
    ]);
  });

  it('keeps blocked containers from the DNS forwarder too', () => {
    const input = chain(egressRuleset(net, [{ address: '10.213.0.8', egress: { block: true } }, open('10.213.0.2')]), 'input');
    const drop = input.indexOf('iifname "tb1" ip saddr { 10.213.0.8 } drop');
    expect(drop).toBeGreaterThan(-1);
    expect(drop).toBeLessThan(input.indexOf('iifname "tb1" ip daddr 10.213.0.1 udp dport 53 accept'));
  });

  it("masquerades what leaves and isolates the containers' ports from each other", () => {
    const script = egressRuleset(net, []);
    expect(chain(script, 'postrouting')).toEqual([
      'type nat hook postrouting priority srcnat; policy accept;',
      'ip saddr 10.213.0.0/16 oifname != "tb1" masquerade',
    ]);
    expect(script).toContain('    iifname "tv*" oifname "tv*" drop\n');
  });

  it('gives the same text for the same containers in any order', () => {
    const a = [open('10.213.0.7'), { address: '10.213.0.2', egress: { block: true } }];
    expect(egressRuleset(net, a)).toBe(egressRuleset(net, [...a].reverse()));
  });
});
