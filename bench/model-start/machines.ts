import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { BridgeNetwork } from '#tern/runtime';
import { api, killAgentContainers, ROOT, type Stack, until } from '../invoke/stack.js';

/** A machine the bench joined to its stack: a second agent on this host with its own state dir (and so empty caches). */
export interface BenchMachine {
  id: string;
  pool: string;
  /** Its agent's state dir: its image store, volume cache and containers. */
  stateDir: string;
  /** Its agent's process: what the machine's own work (pull, unpack, mount) costs in CPU. */
  agentPid: number;
}

/**
 * Creates pool `pool` and machine `id` in it (`tern pool create`, `tern machine create`), joins
 * an agent with its own state dir under the stack's (`tern-agent init`, then `tern-agent`), its
 * own bridge and container range, reading volume chunks through `siteCache` when given, and waits
 * until the machine is ready. The stack's stop() ends the agent, its containers and its network.
 */
export async function joinMachine(
  stack: Stack,
  id: string,
  pool: string,
  siteCache: string | undefined,
  cpuProfileDir?: string,
): Promise<BenchMachine> {
  const tern = (...args: string[]) =>
    execa(process.execPath, [join(ROOT, 'bin', 'tern.js'), ...args], {
      env: { ...process.env, TERN_GATEWAY: stack.gateway, TERN_TOKEN: stack.token },
    });
  await tern('pool', 'create', pool);
  const { command } = JSON.parse((await tern('machine', 'create', '--pool', pool, '--id', id, '--json')).stdout) as { command: string };
  // Under the stack's agent dirs, so that stopping the stack removes its containers too.
  const stateDir = join(stack.ternHome, 'agent', id);
  await mkdir(stateDir, { recursive: true });
  const agentBin = join(ROOT, 'bin', 'tern-agent.js');
  await execa(process.execPath, [agentBin, ...command.split(' ').slice(1), '--state-dir', stateDir]);
  const tag = randomBytes(3);
  const bridge = `tm${tag.toString('hex')}`;
  const env = {
    PATH: process.env.PATH,
    HOME: stateDir,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    NO_COLOR: '1',
    AGENT_DASHBOARD: 'off',
    AGENT_BRIDGE: bridge,
    AGENT_NETWORK_SUBNET: `10.${128 + (tag[0]! % 64)}.${tag[1]}.0/24`,
    ...(siteCache ? { AGENT_SITE_CACHE: siteCache } : {}),
  };
  const log = createWriteStream(join(stateDir, 'agent.out'));
  // A V8 CPU profile of the agent, written when it exits (the stack's stop() ends it with SIGTERM).
  const profile = cpuProfileDir ? ['--cpu-prof', '--cpu-prof-dir', cpuProfileDir, '--cpu-prof-name', `${id}.cpuprofile`] : [];
  const agent: ChildProcess = spawn(process.execPath, [...profile, agentBin, '--state-dir', stateDir], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  agent.stdout!.pipe(log);
  agent.stderr!.pipe(log);
  stack.alsoStop(async () => {
    if (agent.exitCode === null) {
      const exited = new Promise((r) => agent.once('exit', r));
      agent.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      if (agent.exitCode === null) agent.kill('SIGKILL');
    }
    await killAgentContainers(stack.ternHome);
    await new BridgeNetwork({ bridge, stateDir: join(stateDir, 'network') }).destroy().catch(() => undefined);
    await execa('ip', ['link', 'del', bridge], { reject: false });
  });
  await until(
    `machine ${id} ready (agent log: ${stateDir}/agent.out)`,
    120_000,
    async () => ((await api<{ state?: string }>(stack, 'GET', `/api/v1/machines/${id}`)).state === 'ready' ? true : undefined),
    500,
  );
  return { id, pool, stateDir, agentPid: agent.pid! };
}

/**
 * Where the agent's last container start went, from its log: `started R s after its command:
 * volumes mounted at V s, image ready at I s` (the volume mount and the pull run side by side,
 * then runc), or undefined when it logged none.
 */
export async function lastStartPhases(machine: BenchMachine): Promise<string | undefined> {
  const log = await readFile(join(machine.stateDir, 'agent.out'), 'utf8').catch(() => '');
  const lines = [...log.matchAll(/started ([\d.]+) s after its command: volumes mounted at ([\d.]+) s, image ready at ([\d.-]+) s/g)];
  const last = lines.at(-1);
  return last && `volumes mounted at ${last[2]} s, image ready at ${last[3]} s, runc done at ${last[1]} s`;
}
