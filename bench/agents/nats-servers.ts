/**
 * bench/agents' NATS: one private nats-server in operator mode, or (`--nats-servers N`) a cluster
 * of N with routes to each other, every member trusting the same operator material, each with
 * its monitoring and pprof ports open on loopback. A nats-server needs an open file per
 * connection and this machine's hard limit is 20,000 per process: 20,000 agents, each with its
 * own connection, need the connections spread over more than one server, as a real fleet's are.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { freePort } from '#tern/runtime';
import { ROOT } from '../invoke/stack.js';
import { type NatsMonitor } from './profile.js';

interface StartOptions {
  dir: string;
  port: number;
  logFile: string;
  monitor: { httpPort: number; profPort: number };
  operatorDir?: string;
  serverName?: string;
  cluster?: { name: string; port: number; routes: string[] };
}

type NatsModule = {
  startNats(o: StartOptions): Promise<{ pid: number; url: string; child: { kill(s: string): void } }>;
};

export interface NatsServers {
  /** Client URLs, in member order. */
  urls: string[];
  pids: number[];
  monitors: NatsMonitor[];
  /** The directory of the first member: its operator material, creds and signer. */
  dir: string;
  stop(): void;
}

/** Starts `count` servers under dir (the first in dir itself, the others in dir/n<i>); resolves once each greets clients. */
export async function startNatsServers(count: number, dir: string): Promise<NatsServers> {
  const lib = (await import(pathToFileURL(join(ROOT, 'scripts/lib/nats.mjs')).href)) as NatsModule;
  const members = await Promise.all(
    Array.from({ length: count }, async (_, i) => ({
      dir: i === 0 ? dir : join(dir, `n${i + 1}`),
      port: await freePort(),
      route: await freePort(),
      monitor: { httpPort: await freePort(), profPort: await freePort() },
    })),
  );
  const started: { pid: number; url: string; child: { kill(s: string): void } }[] = [];
  const servers: NatsServers = {
    urls: [],
    pids: [],
    monitors: [],
    dir,
    stop: () => started.forEach((s) => s.child.kill('SIGTERM')),
  };
  try {
    // The first creates the operator material the others trust; a member waits for its routes only
    // to serve JetStream, not to greet clients, so each can start in turn.
    for (const [i, m] of members.entries()) {
      const name = count === 1 ? 'nats' : `nats${i + 1}`;
      const s = await lib.startNats({
        dir: m.dir,
        port: m.port,
        logFile: join(dir, `${name}.log`),
        monitor: m.monitor,
        ...(count === 1
          ? {}
          : {
              operatorDir: join(dir, 'operator'),
              serverName: name,
              cluster: {
                name: 'bench-agents',
                port: m.route,
                routes: members.filter((o) => o !== m).map((o) => `nats-route://127.0.0.1:${o.route}`),
              },
            }),
      });
      started.push(s);
      servers.urls.push(s.url);
      servers.pids.push(s.pid);
      const binary = (await readFile(`/proc/${s.pid}/cmdline`, 'utf8')).split('\0')[0]!;
      servers.monitors.push({ ...m.monitor, binary, name });
    }
    return servers;
  } catch (e) {
    servers.stop();
    throw e;
  }
}
