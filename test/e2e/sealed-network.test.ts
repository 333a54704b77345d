import { randomInt } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentNetworkEnv } from '../support/agent-network.js';
import { TestDnsServer } from '../support/dns-server.js';
import { TEST_DATABASE_URL, TEST_NATS_URL } from '../support/isolation.js';
import { PROBE_MODULE, ProbeTargets, reachable } from '../support/probe.js';
import { describeNeeding } from '../support/real-parts.js';
import { everyStep, startStack, type Stack } from '../support/stack.js';

const portOf = (url: string) => Number(new URL(url).port);

/**
 * The sealed-containers issue's "done when": a real endpoint whose handler probes, from inside
 * its runc container, what a container must never reach. Every address probed is held by a
 * host on this machine (a network namespace of the test, or the host itself), so nothing
 * leaves the machine even if a rule were wrong.
 */
(await describeNeeding(['root', 'runc', 'python3', 'ip', 'nft']))('sealed container network end to end', () => {
  let stack: Stack;
  let targets: ProbeTargets;
  let resolver: TestDnsServer;
  let bridgeAddress: string;

  const call = (path: string, body: unknown) =>
    fetch(`${stack.gateway}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  /** Deploys the probe handler under `name` with `extra` spec lines. */
  async function deployProbe(name: string, extra = ''): Promise<void> {
    const dir = stack.scratch(name);
    writeFileSync(join(dir, 'probe.py'), PROBE_MODULE);
    writeFileSync(
      join(dir, 'tern.yaml'),
      `name: ${name}\nkind: endpoint\nhandler: probe.py:predict\ncpu: 0.25\nmemory: 128Mi\nkeep_warm_seconds: 60\n${extra}`,
    );
    const deployed = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect([deployed.code, deployed.stderr]).toEqual([0, '']);
  }

  async function probe(name: string, targets: string[]): Promise<{ result: Record<string, string>; container: string }> {
    const res = await call(`/endpoint/${name}`, { targets });
    expect(res.status).toBe(200);
    return { result: (await res.json()) as Record<string, string>, container: res.headers.get('x-tern-container-id')! };
  }

  /** A container's address, from the agent's lease of it. */
  function addressOf(containerId: string): string {
    const agents = join(String(stack.env.TERN_HOME), 'agent');
    for (const dir of readdirSync(agents)) {
      const leases = join(agents, dir, 'network');
      for (const f of readdirSync(leases)) {
        const lease = JSON.parse(readFileSync(join(leases, f), 'utf8')) as { containerId: string; address: string };
        if (lease.containerId === containerId) return lease.address;
      }
    }
    throw new Error(`no lease for container ${containerId}`);
  }

  beforeAll(async () => {
    targets = await ProbeTargets.start(`192.168.${randomInt(0, 256)}`);
    // The agent's DNS forwarder asks this resolver on the host's loopback, which no container reaches.
    resolver = await TestDnsServer.start({ 'internet.tern.test': targets.internet.address });
    stack = await startStack('sealed', { env: { AGENT_DNS: `127.0.0.1:${resolver.port}` } });
    bridgeAddress = agentNetworkEnv(String(stack.env.TERN_HOME)).AGENT_NETWORK_SUBNET.replace(/0\/24$/, '1');
  }, 180_000);

  afterAll(() => everyStep([() => stack?.stop(), () => targets?.stop(), () => resolver?.stop()]));

  it('reaches the internet host, and none of: the host (loopback, bridge, its address), another container, metadata, a private address', async () => {
    const state = JSON.parse(readFileSync(join(String(stack.env.TERN_HOME), 'state.json'), 'utf8')) as { ports: Record<string, number> };
    const services = [portOf(TEST_NATS_URL), portOf(TEST_DATABASE_URL), portOf(stack.gateway), state.ports.agent, targets.hostPort];
    expect(services.every((p) => Number.isInteger(p) && p > 0)).toBe(true);

    await deployProbe('neighbour');
    const neighbour = addressOf((await probe('neighbour', [])).container);
    await deployProbe('prober');
    // Controls: every target is there, and the host itself reaches it.
    for (const [h, p] of [
      [targets.internet.address, targets.internet.port],
      [targets.metadata.address, targets.metadata.port],
      [targets.privateHost.address, targets.privateHost.port],
      [neighbour, 8080],
      [bridgeAddress, targets.hostPort],
      ...services.map((p) => ['127.0.0.1', p] as const),
    ] as const)
      expect([h, p, await reachable(h, p)]).toEqual([h, p, true]);

    const blocked = [
      ...services.map((p) => `127.0.0.1:${p}`),
      ...services.map((p) => `${bridgeAddress}:${p}`),
      ...(ProbeTargets.hostAddress ? services.map((p) => `${ProbeTargets.hostAddress}:${p}`) : []),
      `${neighbour}:8080`,
      `${targets.metadata.address}:${targets.metadata.port}`,
      `${targets.privateHost.address}:${targets.privateHost.port}`,
    ];
    const open = `${targets.internet.address}:${targets.internet.port}`;
    // By name too: resolved through the agent's forwarder on the bridge.
    const named = `internet.tern.test:${targets.internet.port}`;
    const { result } = await probe('prober', [open, named, ...blocked]);
    expect(result[open]).toBe('open');
    expect(result[named]).toBe('open');
    expect(resolver.queries).toContainEqual({ name: 'internet.tern.test', over: 'udp' });
    expect(blocked.filter((t) => result[t] === 'open')).toEqual([]);
    expect(Object.keys(result).sort()).toEqual([open, named, ...blocked].sort());
  }, 120_000);

  it('with network: {block: true} reaches not even the internet host', async () => {
    await deployProbe('sealed', 'network:\n  block: true\n');
    const target = `${targets.internet.address}:${targets.internet.port}`;
    const { result } = await probe('sealed', [target]);
    expect(result[target]).not.toBe('open');
  }, 60_000);

  it('with network: {allow: [CIDR]} reaches exactly that range', async () => {
    const cidr = targets.internetCidr;
    await deployProbe('narrow', `network:\n  allow: ["${cidr}"]\n`);
    const [allowed, other] = [
      `${targets.internet.address}:${targets.internet.port}`,
      `${targets.otherInternet.address}:${targets.otherInternet.port}`,
    ];
    expect(await reachable(targets.otherInternet.address, targets.otherInternet.port)).toBe(true);
    const { result } = await probe('narrow', [allowed, other]);
    expect(result).toEqual({ [allowed]: 'open', [other]: expect.not.stringMatching(/^open$/) });
  }, 60_000);

  it('refuses a bad CIDR with 400 naming the field', async () => {
    const res = await call('/api/v1/deployments', {
      name: 'bad-net',
      kind: 'endpoint',
      command: ['python3', '-m', 'http.server'],
      network: { allow: ['10.0.0.1/8'] },
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string[] }).message).toEqual([
      'network.allow must hold IPv4 CIDRs such as 203.0.113.0/24: "10.0.0.1/8" has host bits set: the network is 10.0.0.0/8',
    ]);
  });

  it('keeps the agent and a neighbour serving while a fork bomb runs in a container', async () => {
    const dir = stack.scratch('bomb');
    writeFileSync(
      join(dir, 'app.py'),
      [
        'import os, threading, time',
        'def bomb():',
        '    while True:',
        '        try:',
        '            if os.fork() == 0: time.sleep(600)',
        '        except OSError:',
        '            time.sleep(0.001)',
        'def predict(p):',
        '    threading.Thread(target=bomb, daemon=True).start()',
        '    return {"lit": True}',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'tern.yaml'), 'name: bomb\nkind: endpoint\nhandler: app.py:predict\ncpu: 0.25\nmemory: 256Mi\n');
    expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);
    expect((await call('/endpoint/bomb', {})).status).toBe(200);
    await new Promise((r) => setTimeout(r, 3000));
    const { result } = await probe('neighbour', [`${targets.internet.address}:${targets.internet.port}`]);
    expect(Object.values(result)).toEqual(['open']);
    const [machine] = JSON.parse((await stack.tern('machine', 'list', '--json')).stdout) as { id: string }[];
    const shown = await stack.tern('machine', 'show', machine.id);
    expect(shown.stdout).toMatch(/^Isolation\s+runc, network private, user namespaces (on|off)$/m);
  }, 90_000);
});
