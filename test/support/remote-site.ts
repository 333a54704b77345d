import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { execa, type Options } from 'execa';
import { addLinkedNamespace, removeLinkedNamespace } from './netns.js';

/**
 * A machine "at another site" for tests: its own network namespace on this machine whose only
 * link is a veth pair in a /30 of TEST-NET-2 (198.51.100.0/24, a documentation range): the root
 * namespace holds `controlPlane` (where the test binds the gateway and NATS, `npm run up --
 * --public`), the site holds `address`. No default route, and IPv6 off on the link, so the site
 * reaches that one address and nothing else. Needs root and `ip` (iproute2).
 */
export class RemoteSite {
  private constructor(
    readonly namespace: string,
    private readonly hostVeth: string,
    readonly controlPlane: string,
    readonly address: string,
  ) {}

  static async start(): Promise<RemoteSite> {
    const id = randomBytes(3).toString('hex');
    const base = 4 * randomInt(0, 64);
    const site = new RemoteSite(`tern-remote-${id}`, `tr${id}h`, `198.51.100.${base + 1}`, `198.51.100.${base + 2}`);
    const peerVeth = `tr${id}n`;
    try {
      await addLinkedNamespace({
        namespace: site.namespace,
        hostVeth: site.hostVeth,
        peerVeth,
        near: site.controlPlane,
        far: site.address,
        defaultRoute: false,
      });
      // An IPv6 link-local address on the link would be a second way to the root namespace.
      await site.run('sysctl', ['-qw', `net.ipv6.conf.${peerVeth}.disable_ipv6=1`]);
      return site;
    } catch (error) {
      await site.stop();
      throw error;
    }
  }

  /**
   * The command line that runs `command` in the site's network namespace. nsenter, not `ip netns
   * exec`: that one also gives the process a mount namespace with a /sys of its own, where runc
   * finds no cgroup mount; a machine at another site has its cgroups, only its network differs.
   */
  private inside(command: string, args: string[]): [string, string[]] {
    return ['nsenter', [`--net=/run/netns/${this.namespace}`, '--', command, ...args]];
  }

  /** Runs a command inside the site; resolves its result (rejects on a non-zero exit unless `reject: false`). */
  run(command: string, args: string[], options: Options = {}) {
    return execa(...this.inside(command, args), options);
  }

  /** Starts a long-running process inside the site, its output appended to `logFile`. */
  spawn(command: string, args: string[], env: NodeJS.ProcessEnv, logFile: string): ChildProcess {
    const child = spawn(...this.inside(command, args), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const log = createWriteStream(logFile, { flags: 'a' });
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    return child;
  }

  /** 'open', or the error code of a TCP connect to host:port from inside the site (2 s at most). */
  async connect(host: string, port: number): Promise<string> {
    const program = `
      const s = require('node:net').connect(${port}, ${JSON.stringify(host)});
      s.setTimeout(2000, () => { console.log('ETIMEDOUT'); process.exit(0); });
      s.on('connect', () => { console.log('open'); process.exit(0); });
      s.on('error', (e) => { console.log(e.code); process.exit(0); });`;
    return String((await this.run(process.execPath, ['-e', program])).stdout).trim();
  }

  /** The site's routes (main table), IPv4 and IPv6, one line each. */
  async routes(): Promise<string[]> {
    const v4 = String((await this.run('ip', ['-4', 'route', 'show'])).stdout);
    const v6 = String((await this.run('ip', ['-6', 'route', 'show'])).stdout);
    return `${v4}\n${v6}`.split('\n').filter((l) => l.trim());
  }

  /** The local address:port of every listening TCP and UDP socket inside the site. */
  async listeners(): Promise<string[]> {
    const out = String((await this.run('ss', ['-Hltnu'])).stdout);
    return out
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => l.trim().split(/\s+/)[4]);
  }

  async stop(): Promise<void> {
    await removeLinkedNamespace(this.namespace, this.hostVeth);
  }
}
