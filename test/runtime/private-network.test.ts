import { randomBytes, randomInt } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { access, chmod, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { BridgeNetwork, type EgressPolicy, waitForHealth } from '#tern/runtime';
import { aQuery, TestDnsServer } from '../support/dns-server.js';
import { PROBE_MODULE, ProbeTargets, reachable } from '../support/probe.js';
import { describeNeeding } from '../support/real-parts.js';
import { collectLogs, containerId, RuntimeSandbox } from './support.js';

const describeNet = await describeNeeding(['root', 'runc', 'python3', 'ip', 'nft']);

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

/**
 * Asks the resolver in /etc/resolv.conf for answer.tern.test (glibc, over UDP) and the
 * forwarder at argv[1] over TCP by hand, and for a name nobody has; prints what it got. With
 * argv[2] == 'udp-only', only a hand-made UDP query to argv[1], with a 2 s wait.
 */
const DNS_CHECK = `
import json, socket, struct, sys
gateway = sys.argv[1]
q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b''.join(bytes([len(l)]) + l.encode() for l in 'answer.tern.test'.split('.')) + b'\\x00' + struct.pack('>HH', 1, 1)
if len(sys.argv) > 2:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(q, (gateway, 53))
    try:
        reply = s.recv(512)
        print(json.dumps({'udp': socket.inet_ntoa(reply[-4:])}))
    except socket.timeout:
        print(json.dumps({'udp': 'timeout'}))
    sys.exit(0)
out = {'resolvConf': open('/etc/resolv.conf').read()}
try:
    out['udp'] = socket.gethostbyname('answer.tern.test')
except Exception as e:
    out['udp'] = repr(e)
try:
    s = socket.create_connection((gateway, 53), timeout=3)
    s.sendall(struct.pack('>H', len(q)) + q)
    data = b''
    while len(data) < 2 or len(data) < 2 + struct.unpack('>H', data[:2])[0]:
        chunk = s.recv(512)
        if not chunk:
            break
        data += chunk
    out['tcp'] = socket.inet_ntoa(data[-4:])
except Exception as e:
    out['tcp'] = repr(e)
try:
    out['missing'] = socket.gethostbyname('nobody.tern.test')
except Exception as e:
    out['missing'] = repr(e)
print(json.dumps(out))
`;

describeNet('private container network (bridge, NAT, egress rules)', () => {
  let sandbox: RuntimeSandbox;
  let netDir: string;
  let network: BridgeNetwork;
  let targets: ProbeTargets;
  let resolver: TestDnsServer;
  const neighbour = containerId('neighbour');
  let neighbourAddress: string;
  const tag = randomBytes(3).toString('hex');

  beforeAll(async () => {
    netDir = await mkdtemp(join(tmpdir(), 'tern-net-'));
    resolver = await TestDnsServer.start({ 'answer.tern.test': '203.0.113.77' });
    network = new BridgeNetwork({
      bridge: `tb${tag}`,
      subnet: `10.${randomInt(100, 250)}.${randomInt(0, 256)}.0/24`,
      stateDir: netDir,
      dns: [resolver.upstream],
    });
    sandbox = await RuntimeSandbox.create({ network });
    targets = await ProbeTargets.start(`172.31.${randomInt(0, 256)}`);
    const running = await sandbox.runtime.start({
      id: neighbour,
      image: 'host',
      args: [
        'python3',
        '-c',
        'import http.server as h; h.ThreadingHTTPServer(("0.0.0.0", 8080), h.SimpleHTTPRequestHandler).serve_forever()',
      ],
      network: 'private',
    });
    neighbourAddress = running.address!;
    await waitForHealth({ host: neighbourAddress, port: running.port!, check: '/', timeoutMs: 15_000 });
  }, 60_000);

  afterAll(async () => {
    await sandbox?.destroy();
    await network?.destroy();
    await targets?.stop();
    await resolver?.stop();
  });

  /** What a Python program run once in a container on the network printed, as JSON. */
  async function runPython<T>(name: string, args: string[], egress?: EgressPolicy): Promise<T> {
    const id = containerId(name);
    await sandbox.runtime.start({ id, image: 'host', args: ['python3', '-c', ...args], network: 'private', ...(egress ? { egress } : {}) });
    const lines = await collectLogs(sandbox.runtime, id);
    await sandbox.runtime.remove(id);
    const out = lines.find((l) => l.stream === 'stdout')?.line;
    if (!out) throw new Error(`${name} printed nothing: ${lines.map((l) => l.line).join('\n')}`);
    return JSON.parse(out) as T;
  }

  const probeFrom = (name: string, targets: string[], egress?: EgressPolicy) =>
    runPython<Record<string, string>>(name, [PROBE_MODULE, JSON.stringify(targets)], egress);

  it('gives each container its own address, which the host reaches', async () => {
    expect(neighbourAddress).toMatch(/^10\./);
    expect(neighbourAddress).not.toBe(network.gateway);
    expect(await reachable(neighbourAddress, 8080)).toBe(true);
  });

  it("keeps the bridge's address as containers come and go, so a container's answers to the host still arrive", async () => {
    const address = async () => (await readFile(`/sys/class/net/${network.bridge}/address`, 'utf8')).trim();
    const before = await address();
    expect(await reachable(neighbourAddress, 8080)).toBe(true);
    // A port with the lowest address there is: a bridge left to the kernel takes it as its own.
    const id = containerId('low');
    await sandbox.runtime.start({ id, image: 'host', args: ['sleep', '60'], network: 'private' });
    await execa('ip', ['link', 'set', 'dev', (await network.attachment(id))!.hostVeth, 'address', '02:00:00:00:00:01']);
    expect(await address()).toBe(before);
    await sandbox.runtime.remove(id);
    expect(await address()).toBe(before);
    expect(await reachable(neighbourAddress, 8080)).toBe(true);
  }, 30_000);

  it("forgets a removed container's MAC address, so the next container leased its address is reached at once", async () => {
    const id = containerId('reused');
    const address = (await sandbox.runtime.start({ id, image: 'host', args: ['sleep', '60'], network: 'private' })).address!;
    // A connection refused is answered all the same: the host now holds the container's MAC address.
    expect(await reachable(address, 8080)).toBe(false);
    const neighbour = async () => (await execa('ip', ['neigh', 'show', address, 'dev', network.bridge])).stdout.trim();
    expect(await neighbour()).toMatch(/lladdr/);
    await sandbox.runtime.stop(id, 0);
    await sandbox.runtime.remove(id);
    // Left there, the entry kept the gone container's MAC address for up to 45 s, and the next
    // holder of the address saw none of the host's traffic until it expired.
    expect(await neighbour()).toBe('');
  }, 30_000);

  it('by default reaches the internet, and not the host, another container, metadata or private ranges', async () => {
    // Controls: each target is there and answers from the host's own namespace.
    for (const [h, p] of [
      [targets.internet.address, targets.internet.port],
      [targets.metadata.address, targets.metadata.port],
      [targets.privateHost.address, targets.privateHost.port],
      [network.gateway, targets.hostPort],
      ['127.0.0.1', targets.hostPort],
      ['127.0.0.1', 4222],
      ['127.0.0.1', 5432],
    ] as const)
      expect([h, p, await reachable(h, p)]).toEqual([h, p, true]);

    const blocked = [
      `127.0.0.1:${targets.hostPort}`,
      '127.0.0.1:4222',
      '127.0.0.1:5432',
      `${network.gateway}:${targets.hostPort}`,
      `${network.gateway}:4222`,
      ...(ProbeTargets.hostAddress ? [`${ProbeTargets.hostAddress}:${targets.hostPort}`] : []),
      `${neighbourAddress}:8080`,
      `${targets.metadata.address}:${targets.metadata.port}`,
      `${targets.privateHost.address}:${targets.privateHost.port}`,
    ];
    const internetTarget = `${targets.internet.address}:${targets.internet.port}`;
    const result = await probeFrom('probe', [internetTarget, ...blocked]);
    expect(result[internetTarget]).toBe('open');
    for (const t of blocked) expect([t, result[t]]).not.toEqual([t, 'open']);
  }, 60_000);

  it('with block: true reaches nothing, the internet included', async () => {
    const target = `${targets.internet.address}:${targets.internet.port}`;
    expect(await probeFrom('blocked', [target], { block: true })).toEqual({ [target]: expect.not.stringMatching(/^open$/) });
  }, 30_000);

  it('with allow: [CIDR] reaches exactly that range', async () => {
    const allowed = `${targets.internet.address}:${targets.internet.port}`;
    const other = `${targets.otherInternet.address}:${targets.otherInternet.port}`;
    expect(await reachable(targets.otherInternet.address, targets.otherInternet.port)).toBe(true);
    const result = await probeFrom('allow', [allowed, other, `${targets.metadata.address}:${targets.metadata.port}`], {
      allow: [targets.internetCidr, '169.254.0.0/16'],
    });
    expect(result[allowed]).toBe('open');
    expect(result[other]).not.toBe('open');
    // An allow list narrows the default, never widens it: link-local stays out of reach.
    expect(result[`${targets.metadata.address}:${targets.metadata.port}`]).not.toBe('open');
  }, 30_000);

  it("resolves names through the forwarder on the bridge's address, over UDP and TCP, to the resolvers it was given", async () => {
    const seen = await runPython<{ resolvConf: string; udp: string; tcp: string; missing: string }>('dns', [DNS_CHECK, network.gateway]);
    expect(seen).toEqual({
      resolvConf: `nameserver ${network.gateway}\n`,
      udp: '203.0.113.77',
      tcp: '203.0.113.77',
      missing: expect.stringMatching(/gaierror/) as unknown,
    });
    expect(resolver.queries).toEqual(
      expect.arrayContaining([
        { name: 'answer.tern.test', over: 'udp' },
        { name: 'answer.tern.test', over: 'tcp' },
      ]),
    );
  }, 30_000);

  it("answers no DNS query from outside the bridge (the machine's own network)", async () => {
    const before = resolver.queries.length;
    const socket = createSocket('udp4');
    try {
      socket.send(aQuery('answer.tern.test'), 53, network.gateway);
      const answered = await Promise.race([once(socket, 'message').then(() => true), sleep(1500).then(() => false)]);
      expect(answered).toBe(false);
      expect(resolver.queries.length).toBe(before);
    } finally {
      socket.close();
    }
  }, 30_000);

  it('answers no DNS query of a container with block: true', async () => {
    const before = resolver.queries.length;
    const seen = await runPython<{ udp: string }>('dns-blocked', [DNS_CHECK, network.gateway, 'udp-only'], { block: true });
    expect(seen.udp).toBe('timeout');
    expect(resolver.queries.length).toBe(before);
  }, 30_000);

  it('runs a container in a user namespace on the private network: root inside, /sys readable, the internet reached', async () => {
    const userns = await RuntimeSandbox.create({ network, userNamespace: { hostId: 400_000, size: 65_536 } });
    await chmod(userns.dir, 0o711); // the mapped root must walk to the image's rootfs (mkdtemp makes 0700)
    try {
      expect(await userns.runtime.userNamespace()).toEqual({ hostId: 400_000, size: 65_536 });
      const id = containerId('userns');
      const target = `${targets.internet.address}:${targets.internet.port}`;
      const program = `${PROBE_MODULE}\nimport os\nprint(os.getuid(), open('/proc/self/uid_map').read().split(), os.listdir('/sys/class') != [], flush=True)`;
      await userns.runtime.start({
        id,
        image: 'host',
        user: { uid: 0, gid: 0 },
        args: ['python3', '-c', program, JSON.stringify([target])],
        network: 'private',
      });
      const lines = (await collectLogs(userns.runtime, id)).map((l) => `${l.stream}:${l.line}`);
      expect(lines).toEqual([`stdout:{"${target}": "open"}`, "stdout:0 ['0', '400000', '65536'] True"]);
      await userns.runtime.remove(id);
    } finally {
      await userns.destroy();
    }
  }, 30_000);

  it('removes a container with its namespace, veth, lease and rules; a restarted agent drops what is left of gone ones', async () => {
    const id = containerId('gone');
    await sandbox.runtime.start({ id, image: 'host', args: ['sleep', '60'], network: 'private', egress: { block: true } });
    const attachment = (await network.attachment(id))!;
    expect(await exists(`/run/netns/${attachment.netns}`)).toBe(true);
    expect((await execa('nft', ['list', 'table', 'inet', `tern_tb${tag}`])).stdout).toContain(`ip saddr ${attachment.address} drop`);
    await sandbox.runtime.remove(id);
    expect(await network.attachment(id)).toBeUndefined();
    expect(await exists(`/run/netns/${attachment.netns}`)).toBe(false);
    expect((await execa('ip', ['link', 'show', attachment.hostVeth], { reject: false })).exitCode).not.toBe(0);
    expect((await execa('nft', ['list', 'table', 'inet', `tern_tb${tag}`])).stdout).not.toContain(attachment.address);

    // A container whose bundle vanished while no agent ran: its lease goes at the next start-up.
    const orphan = containerId('orphan');
    await sandbox.runtime.start({ id: orphan, image: 'host', args: ['sleep', '60'], network: 'private' });
    const left = (await network.attachment(orphan))!;
    await sandbox.runtime.stop(orphan, 100);
    await execa('runc', ['--root', sandbox.runtime.runcRoot, 'delete', '--force', orphan], { reject: false });
    await execa('rm', ['-rf', sandbox.runtime.bundle(orphan).dir]);
    const restarted = new BridgeNetwork({
      bridge: network.bridge,
      subnet: `${network.gateway.replace(/\.1$/, '.0')}/24`,
      stateDir: netDir,
    });
    await restarted.setup(new Set([neighbour]));
    expect(await restarted.attachment(orphan)).toBeUndefined();
    expect(await exists(`/run/netns/${left.netns}`)).toBe(false);
    expect(await restarted.attachment(neighbour)).toBeDefined();
    expect(await reachable(neighbourAddress, 8080)).toBe(true);
    // The last test: this instance goes, and with it everything on the bridge (spares included).
    await restarted.destroy();
  }, 60_000);
});
