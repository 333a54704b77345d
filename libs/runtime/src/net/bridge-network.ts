import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { ContainerRuntimeError } from '../errors.js';
import { type EgressPolicy, type RuntimeLogger, silentLogger } from '../types.js';
import { BurstTracker } from './burst-tracker.js';
import { ContainerDns, type DnsUpstream, hostResolvers } from './container-dns.js';
import { egressRuleset } from './egress-ruleset.js';
import { formatNet, intToIp, type Ipv4Net, NEVER_REACHED, netSize, parseIpv4Cidr } from './ipv4.js';

export interface BridgeNetworkOptions {
  /** The bridge the agent owns (default `tern0`); at most 15 characters. */
  bridge?: string;
  /** The containers' range (default 10.213.0.0/16): the bridge takes its first address. */
  subnet?: string;
  /**
   * Where each container's address lease is kept (`<dir>/<address>.json`), so restarts keep
   * them apart; the containers' resolv.conf is written beside it (`<dir>.resolv.conf`).
   */
  stateDir: string;
  /** More destinations no container reaches (the control plane's addresses), as CIDRs. */
  blocked?: string[];
  /**
   * The resolvers the containers' DNS forwarder asks (default: the host's, from its
   * /etc/resolv.conf); false: no forwarder, and containers get the host's resolv.conf.
   */
  dns?: readonly DnsUpstream[] | false;
  logger?: RuntimeLogger;
  ip?: string;
  nft?: string;
}

/** One container's place on the bridge, as kept on disk. */
export interface Attachment {
  containerId: string;
  address: string;
  /** The network namespace, `/run/netns/<netns>`. */
  netns: string;
  hostVeth: string;
  egress: EgressPolicy;
}

export const DEFAULT_BRIDGE = 'tern0';
export const DEFAULT_SUBNET = '10.213.0.0/16';
const INTERFACE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/;
/** Namespaces kept ready ahead of the containers that will need them, at the least… */
const MIN_SPARES = 2;
/** …and at the most, however many containers a burst started. */
const MAX_SPARES = 8;
/** Attaches this close together count as one burst (containers of one scale-out). */
const BURST_GAP_MS = 10_000;
/** How long a burst's size sets the number of spares before it falls back towards MIN_SPARES. */
const BURST_MEMORY_MS = 10 * 60_000;
const REPLENISH_DELAY_MS = 2000;
/** A spare's lease names no container: `:` is in no container id. */
const SPARE_PREFIX = ':spare:';

const missingTool = (tool: string, pkg: string) =>
  `${tool} is not installed: the private container network needs it (apt-get install ${pkg}), or set AGENT_NETWORK=host to run containers without network isolation`;

/** An egress narrower than the default, which needs a rule of its own. */
const narrowed = (e: EgressPolicy) => !!e.block || e.allow !== undefined;

/**
 * A private network namespace per container, joined by a veth pair to a bridge the agent owns,
 * with outbound NAT. The rules live in the agent's own nftables tables (`inet tern_<bridge>`,
 * `bridge tern_<bridge>`), rewritten whole and atomically from the leases on disk at set-up and
 * whenever a container with a narrowed egress comes or goes (the others have no rule of their
 * own), so they are idempotent and hold exactly the containers that exist:
 *
 * - containers reach nothing of the host (every local address, whichever interface holds it):
 *   new connections from the bridge are dropped on input; the agent's own connections to a
 *   container (established) come back;
 * - nothing forwarded reaches a container unless it answers the container's own connection;
 * - frames between two containers' ports are dropped (no container reaches another): the
 *   ports are isolated, and the bridge table drops frames from one `tv…` port to another;
 * - forwarded traffic from a container is dropped towards NEVER_REACHED and `blocked`, and
 *   then per container: everything (`block`) or whatever is outside `allow`; IPv6 is dropped
 *   (the bridge has no IPv6);
 * - what is left leaves masqueraded behind the host's address.
 */
export class BridgeNetwork {
  readonly bridge: string;
  readonly subnet: Ipv4Net;
  readonly gateway: string;
  private readonly table: string;
  private readonly log: RuntimeLogger;
  private readonly blocked: string[];
  private ready?: Promise<void>;
  /** Namespaces made ahead of time, ready to hand to the next containers. */
  private readonly spares: Attachment[] = [];
  private making = 0;
  /** The scale-out the spares are kept for: the latest burst of attaches and the largest lately. */
  private readonly demand = new BurstTracker(BURST_GAP_MS, BURST_MEMORY_MS);
  /** nft rewrites and lease changes, one at a time. */
  private queue: Promise<unknown> = Promise.resolve();
  private dns?: ContainerDns;

  constructor(private readonly options: BridgeNetworkOptions) {
    this.bridge = options.bridge ?? DEFAULT_BRIDGE;
    if (!INTERFACE_NAME.test(this.bridge))
      throw new ContainerRuntimeError(`bridge name "${this.bridge}" must be 1-15 letters, digits, _ . -`);
    const subnet = parseIpv4Cidr(options.subnet ?? DEFAULT_SUBNET);
    if (typeof subnet === 'string') throw new ContainerRuntimeError(`container subnet: ${subnet}`);
    if (subnet.prefix > 29 || subnet.prefix < 8)
      throw new ContainerRuntimeError(`container subnet ${formatNet(subnet)} must be a /8 to a /29`);
    this.subnet = subnet;
    this.gateway = intToIp(subnet.base + 1);
    this.table = `tern_${this.bridge.replace(/[^A-Za-z0-9_]/g, '_')}`;
    this.log = options.logger ?? silentLogger;
    this.blocked = [...NEVER_REACHED];
    for (const b of options.blocked ?? []) {
      const net = parseIpv4Cidr(b);
      if (typeof net === 'string') throw new ContainerRuntimeError(`blocked destination: ${net}`);
      this.blocked.push(formatNet(net));
    }
  }

  private get leases(): string {
    return this.options.stateDir;
  }

  /**
   * Creates the bridge and the rules once per process; leases of containers not in `keep`
   * (gone while no agent ran) are released first, with whatever they left behind.
   */
  setup(keep: ReadonlySet<string>): Promise<void> {
    const first = !this.ready;
    this.ready ??= this.serialized(async () => {
      await mkdir(this.leases, { recursive: true, mode: 0o700 });
      const bridgeUp = await this.ipRun(['link', 'show', 'dev', this.bridge]);
      if (bridgeUp.exitCode !== 0) await this.ipx(['link', 'add', this.bridge, 'type', 'bridge']);
      await this.pinAddress();
      await this.ipx(['addr', 'replace', `${this.gateway}/${this.subnet.prefix}`, 'dev', this.bridge]);
      await this.ipx(['link', 'set', this.bridge, 'up']);
      await writeFile('/proc/sys/net/ipv4/ip_forward', '1');
      await writeFile(`/proc/sys/net/ipv6/conf/${this.bridge}/disable_ipv6`, '1').catch(() => undefined);
      for (const a of await this.attachments()) {
        if (keep.has(a.containerId)) continue;
        this.log.info({ containerId: a.containerId, address: a.address }, 'released the network of a container that is gone');
        await this.teardown(a);
      }
      await this.serveDns();
      await this.applyRules();
      this.log.info({ bridge: this.bridge, subnet: formatNet(this.subnet) }, 'private container network ready');
      setImmediate(() => this.replenish());
    });
    // A failed setup (nft missing, say) is tried again by the next container, not remembered.
    if (first) this.ready.catch(() => (this.ready = undefined));
    return this.ready;
  }

  /**
   * Gives a container its namespace, address and rules; returns where runc finds the namespace.
   * A spare made ahead of time is taken when there is one (a cold start then pays no `ip`
   * calls, and no `nft` call unless its egress is narrowed), and another is made behind it.
   */
  attach(containerId: string, egress: EgressPolicy): Promise<Attachment> {
    this.demand.note(Date.now());
    const attached = this.serialized(async () => {
      if (!this.ready) throw new ContainerRuntimeError('the container network is not set up');
      const existing = (await this.attachments()).find((a) => a.containerId === containerId);
      if (existing) {
        await this.teardown(existing);
        await this.applyRules();
      }
      const spare = this.spares.shift();
      const attachment = spare ? { ...spare, containerId, egress } : await this.build(await this.lease(this.names(containerId, egress)));
      try {
        if (spare) await writeFile(this.leaseFile(attachment.address), JSON.stringify(attachment), { mode: 0o600 });
        if (spare ? narrowed(egress) : true) await this.applyRules();
        return attachment;
      } catch (e) {
        await this.teardown(attachment);
        throw e;
      }
    });
    // Made a little later: not while the container that took the spare is starting.
    void attached.finally(() => setTimeout(() => this.replenish(), REPLENISH_DELAY_MS).unref()).catch(() => undefined);
    return attached;
  }

  /**
   * Fixes the bridge's MAC address at the one it has. Left to the kernel, a bridge takes the
   * lowest of its ports' addresses and changes it as veths come and go: every container then
   * sends to the old one (its ARP entry for the gateway) until the entry fails, and a connection
   * the agent holds to it (a task running) sees no answer for minutes of TCP back-off. Setting
   * the address, even to the same one, makes the kernel keep it.
   */
  private async pinAddress(): Promise<void> {
    // Asked of `ip` (netlink), not /sys/class/net: the agent's network namespace may not be the
    // one its /sys was mounted in (a site's agent started with nsenter --net).
    const shown = await this.ipRun(['-j', 'link', 'show', 'dev', this.bridge]);
    const address = shown.exitCode === 0 ? (JSON.parse(String(shown.stdout)) as { address?: string }[])[0]?.address : undefined;
    if (!address) throw new ContainerRuntimeError(`could not read the address of bridge ${this.bridge}: ${(shown.all ?? '').trim()}`);
    await this.ipx(['link', 'set', 'dev', this.bridge, 'address', address]);
  }

  /** Names of a container's namespace and host veth, from a hash of the bridge and its id. */
  private names(containerId: string, egress: EgressPolicy): Omit<Attachment, 'address'> {
    const tag = createHash('sha256').update(`${this.bridge}/${containerId}`).digest('hex').slice(0, 10);
    return { containerId, netns: `tern-${tag}`, hostVeth: `tv${tag}`, egress };
  }

  /** Makes a leased attachment's namespace and veth pair: one `ip` batch on each side. */
  private async build(a: Attachment): Promise<Attachment> {
    try {
      // Isolated ports forward only to the bridge itself, never to one another (the nft bridge
      // rule says the same, should either be missing).
      await this.ipBatch(undefined, [
        `netns add ${a.netns}`,
        `link add ${a.hostVeth} type veth peer name eth0 netns ${a.netns}`,
        `link set ${a.hostVeth} master ${this.bridge} up`,
        `link set ${a.hostVeth} type bridge_slave isolated on`,
      ]);
      await this.ipBatch(a.netns, [
        `addr add ${a.address}/${this.subnet.prefix} dev eth0`,
        'link set eth0 up',
        'link set lo up',
        `route add default via ${this.gateway}`,
      ]);
      return a;
    } catch (e) {
      await this.teardown(a);
      throw e;
    }
  }

  /**
   * Keeps namespaces ready (leased to a spare id, which no container id can be): as many as the
   * largest burst of containers started lately (a scale-out to 3 leaves 3 for the next one),
   * MIN_SPARES to MAX_SPARES. A namespace made while containers start waits in the kernel's
   * locks behind every other namespace being made or removed on the machine (seconds on a busy
   * one), which is what a spare saves a cold start.
   */
  private replenish(): void {
    if (!this.ready) return;
    const wanted = Math.min(MAX_SPARES, Math.max(MIN_SPARES, this.demand.peak(Date.now())));
    while (this.spares.length + this.making < wanted) {
      this.making++;
      const id = `${SPARE_PREFIX}${randomBytes(4).toString('hex')}`;
      void this.lease(this.names(id, {}))
        .then((a) => this.build(a))
        .then(
          (a) => void this.spares.push(a),
          (e: Error) => this.log.warn({ err: e.message }, `could not prepare a spare container network: ${e.message}`),
        )
        .finally(() => this.making--);
    }
  }

  netnsPath(a: Attachment): string {
    return `/run/netns/${a.netns}`;
  }

  /** Removes a container's namespace, veth, lease and rules. Idempotent. */
  detach(containerId: string): Promise<void> {
    return this.serialized(async () => {
      const found = (await this.attachments()).filter((a) => a.containerId === containerId);
      for (const a of found) await this.teardown(a);
      // Only a narrowed egress has rules of its own.
      if (found.some((a) => narrowed(a.egress)) && this.ready) await this.applyRules();
    });
  }

  async attachment(containerId: string): Promise<Attachment | undefined> {
    return (await this.attachments()).find((a) => a.containerId === containerId);
  }

  /** Everything this network made: tables, bridge, namespaces, leases (tests and uninstall). */
  destroy(): Promise<void> {
    return this.serialized(async () => {
      this.ready = undefined;
      await this.dns?.stop();
      this.dns = undefined;
      while (this.making > 0) await new Promise((r) => setTimeout(r, 20));
      this.spares.length = 0;
      for (const a of await this.attachments()) await this.teardown(a);
      await this.nft(
        `table inet ${this.table} {}\ndelete table inet ${this.table}\ntable bridge ${this.table} {}\ndelete table bridge ${this.table}\n`,
      );
      await this.ipRun(['link', 'del', this.bridge]);
      await rm(this.leases, { recursive: true, force: true });
      await rm(this.resolvConfPath, { force: true });
    });
  }

  /**
   * The resolv.conf a container on this network gets in place of the host's: the forwarder on
   * the bridge's address. Undefined when there is none (see serveDns), and before setup.
   */
  get resolvConf(): string | undefined {
    return this.dns ? this.resolvConfPath : undefined;
  }

  /** `nameserver <gateway>`, beside the leases, not among them: everything in that directory is a lease. */
  private get resolvConfPath(): string {
    return `${this.leases}.resolv.conf`;
  }

  // --- internals -------------------------------------------------------------------------

  /**
   * Starts the containers' DNS forwarder on the bridge's address (see ContainerDns). Without
   * resolvers, or with port 53 there taken, containers keep the host's resolv.conf, as before.
   */
  private async serveDns(): Promise<void> {
    if (this.options.dns === false || this.dns) return;
    const upstreams = this.options.dns ?? (await hostResolvers());
    const without = (why: string) => this.log.warn({ bridge: this.bridge }, `containers get the host's resolv.conf: ${why}`);
    if (!upstreams.length) return without('/etc/resolv.conf names no resolver');
    const dns = new ContainerDns(this.gateway, upstreams, this.log);
    try {
      await dns.start();
    } catch (e) {
      return without(`no DNS forwarder on ${this.gateway}:53 (${(e as Error).message})`);
    }
    await writeFile(this.resolvConfPath, `nameserver ${this.gateway}\n`, { mode: 0o644 });
    this.dns = dns;
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async attachments(): Promise<Attachment[]> {
    const files = (await readdir(this.leases).catch(() => [] as string[])).filter((f) => f.endsWith('.json'));
    const out: Attachment[] = [];
    for (const f of files) {
      try {
        out.push(JSON.parse(await readFile(join(this.leases, f), 'utf8')) as Attachment);
      } catch {
        // A lease half written when the agent died: its file name still holds the address.
        await rm(join(this.leases, f), { force: true });
      }
    }
    return out;
  }

  /**
   * The lowest free address (after the bridge's own), claimed by creating `<address>.json`
   * exclusively: two agents, or an agent and its restarted self, never share one.
   */
  private async lease(a: Omit<Attachment, 'address'>): Promise<Attachment> {
    const taken = new Set((await readdir(this.leases).catch(() => [] as string[])).map((f) => f.replace(/\.json$/, '')));
    const last = this.subnet.base + netSize(this.subnet) - 2;
    for (let n = this.subnet.base + 2; n <= last; n++) {
      const address = intToIp(n);
      if (taken.has(address)) continue;
      const attachment = { ...a, address };
      try {
        await writeFile(this.leaseFile(address), JSON.stringify(attachment), { flag: 'wx', mode: 0o600 });
        return attachment;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
    }
    throw new ContainerRuntimeError(`no free address left in ${formatNet(this.subnet)} for container ${a.containerId}`, a.containerId);
  }

  private async teardown(a: Attachment): Promise<void> {
    // The container's end of the veth pair goes with its namespace, and the host's end with it
    // (deleted by name too, in case the namespace was lost first); -force runs all three whatever
    // fails. Last, the host forgets the container's MAC address: its entry would outlive the port
    // (reachable for up to 45 s after the last answer), and the next container leased this
    // address would not be reached until it expired, its health checks and requests sent to the
    // gone one's address.
    await execa(this.options.ip ?? 'ip', ['-force', '-batch', '-'], {
      input: `netns del ${a.netns}\nlink del ${a.hostVeth}\nneigh del ${a.address} dev ${this.bridge}\n`,
      reject: false,
      all: true,
    });
    await rm(this.leaseFile(a.address), { force: true });
  }

  private leaseFile(address: string): string {
    return join(this.leases, `${address}.json`);
  }

  /** The whole ruleset of this network, replaced in one nft transaction. */
  private async applyRules(): Promise<void> {
    const network = { table: this.table, bridge: this.bridge, subnet: this.subnet, gateway: this.gateway, blocked: this.blocked };
    await this.nft(egressRuleset({ ...network, dns: Boolean(this.dns) }, await this.attachments()));
  }

  private async nft(script: string): Promise<void> {
    const r = await execa(this.options.nft ?? 'nft', ['-f', '-'], { input: script, reject: false, all: true });
    if ((r as { code?: string }).code === 'ENOENT') throw new ContainerRuntimeError(missingTool('nft', 'nftables'));
    if (r.exitCode !== 0)
      throw new ContainerRuntimeError(`nft refused the container network's rules: ${(r.all ?? '').trim() || `exit ${r.exitCode}`}`);
  }

  private async ipRun(args: string[]) {
    const r = await execa(this.options.ip ?? 'ip', args, { reject: false, all: true, stdin: 'ignore' });
    if ((r as { code?: string }).code === 'ENOENT') throw new ContainerRuntimeError(missingTool('ip', 'iproute2'));
    return r;
  }

  private async ipx(args: string[]): Promise<void> {
    const r = await this.ipRun(args);
    if (r.exitCode !== 0) throw new ContainerRuntimeError(`ip ${args.join(' ')}: ${(r.all ?? '').trim() || `exit ${r.exitCode}`}`);
  }

  /** `ip -batch` in the root namespace (netns undefined) or in `netns`: one exec for many commands. */
  private async ipBatch(netns: string | undefined, lines: string[]): Promise<void> {
    const args = [...(netns ? ['-n', netns] : []), '-batch', '-'];
    const r = await execa(this.options.ip ?? 'ip', args, { input: lines.join('\n'), reject: false, all: true });
    if (r.exitCode !== 0) throw new ContainerRuntimeError(`ip ${args.join(' ')}: ${(r.all ?? '').trim() || `exit ${r.exitCode}`}`);
  }
}
