import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The bridge, container range and DNS of a test's agent, derived from its state directory: tests
 * running at the same time each get their own (an agent's rules describe only its own
 * containers, so two agents must never share a bridge), and a restarted agent gets its again.
 */
export function agentNetworkEnv(stateDir: string): { AGENT_BRIDGE: string; AGENT_NETWORK_SUBNET: string; AGENT_DNS: string } {
  const h = createHash('sha256').update(stateDir).digest();
  return {
    AGENT_BRIDGE: `tb${h.toString('hex').slice(0, 8)}`,
    AGENT_NETWORK_SUBNET: `10.${64 + (h[4] % 64)}.${h[5]}.0/24`,
    // No container of a test asks this machine's own resolver anything (a test that resolves
    // names gives its agent a resolver of its own: sealed-network).
    AGENT_DNS: 'off',
  };
}

/**
 * Removes what the agent of `stateDir` (an agent's state dir, or a TERN_HOME with agents under
 * agent/) set up for its containers: the namespaces it still leases (its spares), the bridge
 * and its nftables tables.
 */
export function removeAgentNetwork(stateDir: string): void {
  const bridge = agentNetworkEnv(stateDir).AGENT_BRIDGE;
  const quiet = { stdio: 'ignore' as const };
  const agents = join(stateDir, 'agent');
  const leaseDirs = [join(stateDir, 'network'), ...(existsSync(agents) ? readdirSync(agents).map((d) => join(agents, d, 'network')) : [])];
  for (const dir of leaseDirs.filter((d) => existsSync(d))) {
    for (const f of readdirSync(dir)) {
      try {
        const { netns } = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { netns: string };
        execFileSync('ip', ['netns', 'del', netns], quiet);
      } catch {
        // gone already
      }
    }
  }
  for (const family of ['inet', 'bridge']) {
    try {
      execFileSync('nft', ['delete', 'table', family, `tern_${bridge}`], quiet);
    } catch {
      // not there
    }
  }
  try {
    execFileSync('ip', ['link', 'del', bridge], quiet);
  } catch {
    // not there
  }
}
