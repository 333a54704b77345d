import type { EgressPolicy } from '../types.js';
import { formatNet, ipToInt, type Ipv4Net, parseIpv4Cidr } from './ipv4.js';

/** The network a ruleset is for: what BridgeNetwork holds of it. */
export interface EgressNetwork {
  /** The name of the agent's nft tables (inet and bridge). */
  readonly table: string;
  readonly bridge: string;
  readonly subnet: Ipv4Net;
  /** The bridge's own address, where the DNS forwarder listens. */
  readonly gateway: string;
  /** Destinations no container reaches, as CIDRs (NEVER_REACHED and the control plane's). */
  readonly blocked: readonly string[];
  /** Whether the DNS forwarder serves the bridge. */
  readonly dns: boolean;
}

/**
 * The whole nft ruleset of a bridge network with these containers attached, as one script that
 * replaces the agent's tables atomically (see BridgeNetwork for what each rule keeps out). Pure:
 * the same network and containers give the same text, in address order.
 */
export function egressRuleset(net: EgressNetwork, attachments: readonly { address: string; egress: EgressPolicy }[]): string {
  const t = net.table;
  const br = JSON.stringify(net.bridge);
  const subnet = formatNet(net.subnet);
  const sorted = attachments.slice().sort((x, y) => ipToInt(x.address) - ipToInt(y.address));
  const perContainer = sorted.flatMap((a) => {
    if (a.egress.block) return [`    ip saddr ${a.address} drop`];
    if (a.egress.allow) {
      const nets = a.egress.allow.map((c) => parseIpv4Cidr(c)).filter((n): n is Ipv4Net => typeof n !== 'string');
      const allowed = nets.length ? `ip daddr != { ${nets.map(formatNet).join(', ')} } ` : '';
      return [`    ip saddr ${a.address} ${allowed}drop`];
    }
    return [];
  });
  const blockedAddresses = sorted.filter((a) => a.egress.block).map((a) => a.address);
  return [
    `table inet ${t} {}`,
    `delete table inet ${t}`,
    `table inet ${t} {`,
    `  set never_reached {`,
    `    type ipv4_addr; flags interval; auto-merge;`,
    `    elements = { ${net.blocked.join(', ')} }`,
    `  }`,
    `  chain input {`,
    `    type filter hook input priority filter - 5; policy accept;`,
    // The DNS forwarder on the bridge's address answers the bridge only: never the machine's
    // own network (a remote site's LAN), where it would be an open resolver.
    ...(net.dns ? ['udp', 'tcp'].map((p) => `    iifname != ${br} ip daddr ${net.gateway} ${p} dport 53 drop`) : []),
    `    iifname ${br} ct state established,related accept`,
    // The DNS forwarder on the bridge's address, for every container that may reach out.
    ...(blockedAddresses.length ? [`    iifname ${br} ip saddr { ${blockedAddresses.join(', ')} } drop`] : []),
    ...(net.dns ? ['udp', 'tcp'].map((p) => `    iifname ${br} ip daddr ${net.gateway} ${p} dport 53 accept`) : []),
    `    iifname ${br} drop`,
    `  }`,
    `  chain forward {`,
    `    type filter hook forward priority filter - 5; policy accept;`,
    `    iifname ${br} jump from_containers`,
    `    oifname ${br} ct state established,related accept`,
    `    oifname ${br} drop`,
    `  }`,
    `  chain from_containers {`,
    `    meta nfproto ipv6 drop`,
    `    ip saddr != ${subnet} drop`,
    `    ip daddr @never_reached drop`,
    ...perContainer,
    `    accept`,
    `  }`,
    `  chain postrouting {`,
    `    type nat hook postrouting priority srcnat; policy accept;`,
    `    ip saddr ${subnet} oifname != ${br} masquerade`,
    `  }`,
    `}`,
    `table bridge ${t} {}`,
    `delete table bridge ${t}`,
    `table bridge ${t} {`,
    `  chain forward {`,
    `    type filter hook forward priority filter; policy accept;`,
    // Every tern container's host veth is tv<hash>: no frame goes from one to another.
    `    iifname "tv*" oifname "tv*" drop`,
    `  }`,
    `}`,
    '',
  ].join('\n');
}
