import { randomBytes, randomInt } from 'node:crypto';
import { once } from 'node:events';
import { access, chmod, mkdtemp } from 'node:fs/promises';
import { createServer, type Server, Socket } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { BridgeNetwork, type EgressPolicy, waitForHealth } from '#tern/runtime';
import { InternetHost } from '../support/internet-host.js';
import { PROBE_MODULE } from '../support/probe.js';
import { describeNeeding } from '../support/real-parts.js';
import { collectLogs, containerId, RuntimeSandbox } from './support.js';

const describeNet = await describeNeeding(['root', 'runc', 'python3', 'ip', 'nft']);

/** Whether a TCP connection from this (the root) namespace gets through. */
async function reachable(host: string, port: number): Promise<boolean> {
  const socket = new Socket();
  socket.setTimeout(2000);
  return new Promise((resolve) => {
    socket.once('connect', () => resolve(true));
    socket.once('timeout', () => resolve(false));
    socket.once('error', () => resolve(false));
    socket.connect(port, host);
  }).finally(() => socket.destroy()) as Promise<boolean>;
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

describeNet('private container network (bridge, NAT, egress rules)', () => {
  let sandbox: RuntimeSandbox;
  let netDir: string;
  let network: BridgeNetwork;
  let internet: InternetHost;
  let otherInternet: InternetHost;
  let metadata: InternetHost;
  let privateHost: InternetHost;
  let hostService: Server;
  let hostPort: number;
  const neighbour = containerId('neighbour');
  let neighbourAddress: string;
  const tag = randomBytes(3).toString('hex');
  const hostAddress = Object.values(networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

  beforeAll(async () => {
    netDir = await mkdtemp(join(tmpdir(), 'tern-net-'));
    network = new BridgeNetwork({ bridge: `tb${tag}`, subnet: `10.${randomInt(100, 250)}.${randomInt(0, 256)}.0/24`, stateDir: netDir });
    sandbox = await RuntimeSandbox.create({ network });
    // Every address a probe targets is held by a host on this machine, so nothing leaves it.
    const slot = 4 * randomInt(0, 32);
    internet = await InternetHost.start([{ status: 200 }], `203.0.113.${slot + 2}`);
    otherInternet = await InternetHost.start([{ status: 200 }], `203.0.113.${slot + 130}`);
    metadata = await InternetHost.start([{ status: 200 }], '169.254.169.254');
    privateHost = await InternetHost.start([{ status: 200 }], `172.31.${randomInt(0, 256)}.${4 * randomInt(0, 64) + 2}`);
    // A service of the host's listening on every address, as a careless one would.
    hostService = createServer((s) => s.end());
    hostService.listen(0, '0.0.0.0');
    await once(hostService, 'listening');
    hostPort = (hostService.address() as { port: number }).port;
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
    await waitForHealth({ host: neighbourAddress, port: running.port!, path: '/', timeoutMs: 15_000 });
  }, 60_000);

  afterAll(async () => {
    await sandbox?.destroy();
    await network?.destroy();
    for (const h of [internet, otherInternet, metadata, privateHost]) await h?.stop();
    hostService?.close();
  });

  async function probeFrom(name: string, targets: string[], egress?: EgressPolicy): Promise<Record<string, string>> {
    const id = containerId(name);
    await sandbox.runtime.start({
      id,
      image: 'host',
      args: ['python3', '-c', PROBE_MODULE, JSON.stringify(targets)],
      network: 'private',
      ...(egress ? { egress } : {}),
    });
    const lines = await collectLogs(sandbox.runtime, id);
    await sandbox.runtime.remove(id);
    const out = lines.find((l) => l.stream === 'stdout')?.line;
    if (!out) throw new Error(`the probe printed nothing: ${lines.map((l) => l.line).join('\n')}`);
    return JSON.parse(out) as Record<string, string>;
  }

  it('gives each container its own address, which the host reaches', async () => {
    expect(neighbourAddress).toMatch(/^10\./);
    expect(neighbourAddress).not.toBe(network.gateway);
    expect(await reachable(neighbourAddress, 8080)).toBe(true);
  });

  it('by default reaches the internet, and not the host, another container, metadata or private ranges', async () => {
    // Controls: each target is there and answers from the host's own namespace.
    for (const [h, p] of [
      [internet.address, internet.port],
      [metadata.address, metadata.port],
      [privateHost.address, privateHost.port],
      [network.gateway, hostPort],
      ['127.0.0.1', hostPort],
      ['127.0.0.1', 4222],
      ['127.0.0.1', 5432],
    ] as const)
      expect([h, p, await reachable(h, p)]).toEqual([h, p, true]);

    const blocked = [
      `127.0.0.1:${hostPort}`,
      '127.0.0.1:4222',
      '127.0.0.1:5432',
      `${network.gateway}:${hostPort}`,
      `${network.gateway}:4222`,
      ...(hostAddress ? [`${hostAddress}:${hostPort}`] : []),
      `${neighbourAddress}:8080`,
      `${metadata.address}:${metadata.port}`,
      `${privateHost.address}:${privateHost.port}`,
    ];
    const internetTarget = `${internet.address}:${internet.port}`;
    const result = await probeFrom('probe', [internetTarget, ...blocked]);
    expect(result[internetTarget]).toBe('open');
    for (const t of blocked) expect([t, result[t]]).not.toEqual([t, 'open']);
  }, 60_000);

  it('with block: true reaches nothing, the internet included', async () => {
    const target = `${internet.address}:${internet.port}`;
    expect(await probeFrom('blocked', [target], { block: true })).toEqual({ [target]: expect.not.stringMatching(/^open$/) });
  }, 30_000);

  it('with allow: [CIDR] reaches exactly that range', async () => {
    const allowed = `${internet.address}:${internet.port}`;
    const other = `${otherInternet.address}:${otherInternet.port}`;
    expect(await reachable(otherInternet.address, otherInternet.port)).toBe(true);
    const result = await probeFrom('allow', [allowed, other, `${metadata.address}:${metadata.port}`], {
      allow: [`${internet.address.replace(/\d+$/, (d) => String(Number(d) - 2))}/30`, '169.254.0.0/16'],
    });
    expect(result[allowed]).toBe('open');
    expect(result[other]).not.toBe('open');
    // An allow list narrows the default, never widens it: link-local stays out of reach.
    expect(result[`${metadata.address}:${metadata.port}`]).not.toBe('open');
  }, 30_000);

  it('runs a container in a user namespace on the private network: root inside, /sys readable, the internet reached', async () => {
    const userns = await RuntimeSandbox.create({ network, userNamespace: { hostId: 400_000, size: 65_536 } });
    await chmod(userns.dir, 0o711); // the mapped root must walk to the image's rootfs (mkdtemp makes 0700)
    try {
      expect(await userns.runtime.userNamespace()).toEqual({ hostId: 400_000, size: 65_536 });
      const id = containerId('userns');
      const target = `${internet.address}:${internet.port}`;
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
