import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import { ensureInstallation, serverConfig, type ServerConfigOptions, writeSecret } from '#tern/nats-auth';
import { natsAuthDir } from './nats-users.js';
import { freePort } from './processes.js';

/** The cluster's JetStream domain (what a leaf with JetStream of its own would name to reach it). */
const HUB_DOMAIN = 'hub';

/** One nats-server of the harness: its config on disk, so a killed one restarts on the same store. */
class NatsNode {
  private child?: ChildProcess;

  constructor(
    readonly name: string,
    readonly url: string,
    private readonly config: string,
    private readonly logFile: string,
  ) {}

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): this {
    const out = openSync(this.logFile, 'a');
    this.child = spawn('nats-server', ['-c', this.config], { stdio: ['ignore', out, out] });
    closeSync(out);
    return this;
  }

  /** kill -9: no goodbye to the cluster, JetStream's store left as it was. */
  async kill(): Promise<void> {
    await this.signal('SIGKILL');
  }

  async stop(): Promise<void> {
    await this.signal('SIGTERM');
  }

  log(): string {
    return readFileSync(this.logFile, 'utf8');
  }

  private async signal(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  }
}

/**
 * A NATS cluster on this machine the way an operator runs one past a single server: three
 * `nats-server` processes with routes to each other, each its own JetStream store, in operator
 * mode with the test run's installation (so every service's and machine's user works on it),
 * and a leaf node for a "remote site": a server without JetStream that agents connect to, with
 * one connection out to the cluster (any of its servers), as a GPU site behind NAT would join.
 * What its clients publish reaches the cluster's streams; the JetStream API (consumers, KV) is
 * not carried across a leaf that does not extend the cluster's JetStream.
 */
export class NatsCluster {
  private constructor(
    readonly nodes: NatsNode[],
    readonly leaf: NatsNode,
    private readonly dir: string,
  ) {}

  /** The cluster's client URLs (NATS_URL lists them all). */
  get urls(): string[] {
    return this.nodes.map((n) => n.url);
  }

  static async start(size = 3): Promise<NatsCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'tern-test-cluster-'));
    const inst = await ensureInstallation(join(natsAuthDir(), 'operator'));
    const ports = await Promise.all(
      Array.from({ length: size }, async () => ({ client: await freePort(), route: await freePort(), leaf: await freePort() })),
    );
    const host = '127.0.0.1';
    const write = (name: string, opts: Omit<ServerConfigOptions, 'storeDir' | 'resolverDir'>) => {
      const home = join(dir, name);
      mkdirSync(join(home, 'jwt'), { recursive: true });
      const config = join(home, 'server.conf');
      writeSecret(config, serverConfig(inst, { ...opts, serverName: name, storeDir: join(home, 'store'), resolverDir: join(home, 'jwt') }));
      return new NatsNode(name, `nats://${host}:${opts.port}`, config, join(home, 'nats.log'));
    };
    const nodes = ports.map((p, i) =>
      write(`n${i + 1}`, {
        host,
        port: p.client,
        cluster: {
          name: 'tern-test',
          port: p.route,
          routes: ports.filter((_, j) => j !== i).map((o) => `nats-route://${host}:${o.route}`),
        },
        jetStreamDomain: HUB_DOMAIN,
        leafPort: p.leaf,
      }),
    );
    const leaf = write('site', {
      host,
      port: await freePort(),
      leafOf: { urls: ports.map((p) => `nats-leaf://${host}:${p.leaf}`), credsFile: harnessCredsFile() },
    });
    const cluster = new NatsCluster(nodes, leaf, dir);
    try {
      for (const n of [...nodes, leaf]) n.start();
      await cluster.ready();
      return cluster;
    } catch (e) {
      await cluster.stop();
      throw e;
    }
  }

  /** Connects as the harness's user (every subject) to the given servers (default: the cluster). */
  connect(servers = this.urls, name = 'cluster-test'): Promise<NatsConnection> {
    return connect({
      servers,
      name,
      authenticator: credsAuthenticator(readFileSync(harnessCredsFile())),
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
  }

  /** Until JetStream answers through every running server of the cluster and the leaf is linked to it. */
  async ready(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const until = async (what: string, node: NatsNode, probe: () => Promise<boolean>) => {
      for (;;) {
        let reason = 'not yet';
        try {
          if (await probe()) return;
        } catch (e) {
          reason = (e as Error).message;
        }
        if (Date.now() > deadline) throw new Error(`NATS ${node.name}: ${what}: ${reason}\n${node.log().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    for (const n of this.nodes.filter((x) => x.running)) {
      await until('JetStream not answering', n, async () => {
        const nc = await this.connect([n.url], `ready-${n.name}`);
        try {
          await (await jetstreamManager(nc, { timeout: 2000 })).getAccountInfo();
          return true;
        } finally {
          await nc.close();
        }
      });
    }
    await until('not linked to the cluster', this.leaf, () => Promise.resolve(/Leafnode connection created/.test(this.leaf.log())));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.nodes, this.leaf].map((n) => n.stop()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function harnessCredsFile(): string {
  const creds = process.env.TEST_NATS_CREDS;
  if (!creds) throw new Error('TEST_NATS_CREDS is not set: run integration tests through jest (test/support/global-setup.mjs)');
  return creds;
}
