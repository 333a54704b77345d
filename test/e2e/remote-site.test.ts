import { type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { type DeploymentDetail } from '#tern/contracts';
import { keyPair } from '#tern/nats-auth';
import { InternetHost } from '../support/internet-host.js';
import { reachable } from '../support/probe.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { RemoteSite } from '../support/remote-site.js';
import { startStack, type Stack } from '../support/stack.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const EXAMPLES = join(ROOT, 'examples');
const POOL = 'remote-site';
const MACHINE = 'remote-1';

/** The claims of a JWT (no check of its signature: NATS did that when it let the agent in). */
const claims = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()) as { sub: string };

/** This machine's own non-loopback IPv4 address, if it has one (not the test's veth ends). */
const ownAddress = () =>
  Object.entries(networkInterfaces())
    .filter(([name]) => !/^(tr|ti|tb|veth)/.test(name))
    .flatMap(([, addresses]) => addresses ?? [])
    .find((i) => i.family === 'IPv4' && !i.internal)?.address;

/**
 * Zero-trust machines, "a machine on another network can join": an agent in its own network
 * namespace whose only link leads to the control plane's address (`npm run up -- --public`
 * binds the gateway and its private NATS there), no default route, nothing of it reachable from
 * outside. It joins with a one-time join token and its own NATS key, as an operator's worker
 * would (`tern machine create` → `tern-agent init` → `tern-agent`), and serves the invokes and
 * tasks of deployments placed on it (its own pool, so nothing lands on the stack's local agent).
 */
(await describeNeeding(['root', 'runc', 'python3', 'ip', 'nft']))('a machine at a remote site', () => {
  let site: RemoteSite;
  let stack: Stack;
  let agent: ChildProcess | undefined;
  let agentDir: string;
  let joinToken: string;

  const auth = () => ({ authorization: `Bearer ${stack.token}` });
  const api = async <T>(path: string): Promise<{ status: number; body: T }> => {
    const res = await fetch(`${stack.gateway}${path}`, { headers: auth() });
    return { status: res.status, body: (await res.json()) as T };
  };
  const agentLog = () => (existsSync(join(agentDir, 'agent.out')) ? readFileSync(join(agentDir, 'agent.out'), 'utf8') : '');

  /** An example copied under `name`, placed in the remote site's pool. */
  function example(dir: string, name: string, replace: Record<string, string> = {}): string {
    const into = stack.scratch(name);
    cpSync(join(EXAMPLES, dir), into, { recursive: true });
    let spec = readFileSync(join(into, 'tern.yaml'), 'utf8').replace(/^name:.*$/m, `name: ${name}`);
    for (const [from, to] of Object.entries(replace)) spec = spec.replace(new RegExp(`^${from}:.*$`, 'm'), `${from}: ${to}`);
    writeFileSync(join(into, 'tern.yaml'), `${spec}\npool: ${POOL}\n`);
    return join(into, 'tern.yaml');
  }

  beforeAll(async () => {
    site = await RemoteSite.start();
    stack = await startStack('remote', { args: ['--public', site.controlPlane], env: { NATS_URL: undefined } });
    // Under the stack's agent dirs, so that stopping the stack removes its containers too.
    agentDir = join(String(stack.env.TERN_HOME), 'agent', 'remote-site');
    mkdirSync(agentDir, { recursive: true });
  }, 240_000);

  afterAll(async () => {
    if (agent && agent.exitCode === null) {
      const exited = new Promise((r) => agent!.once('exit', r));
      agent.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 15_000)))]);
      clearTimeout(timer);
      if (agent.exitCode === null) agent.kill('SIGKILL');
    }
    try {
      await stack?.stop();
    } finally {
      await site?.stop();
    }
  }, 120_000);

  it('joins with its join token through the one address it can reach, under its own NATS key', async () => {
    expect((await stack.tern('pool', 'create', POOL)).code).toBe(0);
    const created = await stack.tern('machine', 'create', '--pool', POOL, '--id', MACHINE, '--json');
    expect([created.code, created.stderr]).toEqual([0, '']);
    const machine = JSON.parse(created.stdout) as { joinToken: string; command: string };
    joinToken = machine.joinToken;
    expect(machine.command).toBe(`tern-agent init --gateway ${stack.gateway} --token ${joinToken} --pool ${POOL}`);

    // What the operator pastes on the worker, run at the site, then the agent with nothing of
    // the control plane's in its environment: no NATS URL or user, no operator token.
    const agentBin = join(ROOT, 'bin', 'tern-agent.js');
    const init = await site.run(process.execPath, [agentBin, ...machine.command.split(' ').slice(1), '--state-dir', agentDir]);
    expect(init.stdout).toContain(join(agentDir, 'config.yaml'));
    const env = { PATH: process.env.PATH, HOME: agentDir, LOG_LEVEL: 'info', NO_COLOR: '1', AGENT_DASHBOARD: 'off' };
    agent = site.spawn(process.execPath, [agentBin, '--state-dir', agentDir], env, join(agentDir, 'agent.out'));

    const ready = await waitFor(
      `${MACHINE} ready (agent log: ${agentDir}/agent.out)`,
      async () => {
        const m = await api<{ state: string; pool: string }>(`/api/v1/machines/${MACHINE}`);
        return m.status === 200 && m.body.state === 'ready' && m.body;
      },
      120_000,
      500,
    );
    expect(ready.pool).toBe(POOL);
    // NATS too is reached at the control plane's address, the one registration advertised.
    expect(agentLog()).toContain(`registered as ${MACHINE} in pool ${POOL}; NATS nats://${site.controlPlane}:`);

    // The join token is spent: the agent keeps the machine token it was given instead.
    const config = readFileSync(join(agentDir, 'config.yaml'), 'utf8');
    expect(config).not.toContain(joinToken);
    expect(config).toMatch(/^token: \S+$/m);
    // Its NATS user is for the key it made itself; the seed stays in its state dir (mode 600).
    const seed = readFileSync(join(agentDir, 'nats.nk'), 'utf8').trim();
    const creds = readFileSync(join(agentDir, 'nats.creds'), 'utf8');
    expect(creds).toContain(seed);
    const jwt = /-----BEGIN NATS USER JWT-----\s+(\S+)\s+/.exec(creds)![1];
    expect(claims(jwt).sub).toBe(keyPair(seed).getPublicKey());
    expect(statSync(join(agentDir, 'nats.nk')).mode & 0o777).toBe(0o600);
  }, 180_000);

  it('answers the invokes of an endpoint placed on it and runs the tasks of a queue placed on it', async () => {
    const deployed = await stack.tern('deploy', example('hello-python', 'remote-hello', { keep_warm_seconds: '300' }));
    expect([deployed.code, deployed.stderr]).toEqual([0, '']);
    // The first call waits for a cold start, which a loaded machine may stretch past the
    // gateway's invoke timeout (504): called again until a container answers.
    const res = await waitFor(
      'an answer from remote-hello',
      async () => {
        const r = await fetch(`${stack.gateway}/endpoint/remote-hello`, {
          method: 'POST',
          headers: { ...auth(), 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'Ada' }),
        });
        return r.status !== 504 && r;
      },
      180_000,
      1000,
    );
    expect(res.status).toBe(200);
    expect(((await res.json()) as { hello: string }).hello).toBe('Ada');
    // The container that answered runs at the site: its bundle is in the remote agent's state dir.
    const container = res.headers.get('x-tern-container-id')!;
    expect(existsSync(join(agentDir, 'runtime', 'containers', container, 'config.json'))).toBe(true);

    const queued = await stack.tern('deploy', example('task-queue', 'remote-squares'));
    expect([queued.code, queued.stderr]).toEqual([0, '']);
    const ids: string[] = [];
    for (const n of [2, 3, 4]) {
      const submitted = await fetch(`${stack.gateway}/taskqueue/remote-squares`, {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json' },
        body: JSON.stringify({ n }),
      });
      expect(submitted.status).toBe(202);
      ids.push(((await submitted.json()) as { task_id: string }).task_id);
    }
    const results = [];
    for (const id of ids) {
      const task = await waitFor(
        `task ${id} done`,
        async () => {
          const t = (await (await fetch(`${stack.gateway}/api/v1/tasks/${id}/wait?timeout=20`, { headers: auth() })).json()) as {
            status: string;
            done: boolean;
            result?: { square: number };
          };
          return t.done && t;
        },
        150_000,
        0,
      );
      results.push([task.status, task.result?.square]);
    }
    expect(results).toEqual([
      ['COMPLETE', 4],
      ['COMPLETE', 9],
      ['COMPLETE', 16],
    ]);
    const placed = await api<DeploymentDetail>('/api/v1/deployments/remote-squares');
    expect(new Set(placed.body.containers.map((c) => c.machineId))).toEqual(new Set([MACHINE]));
  }, 300_000);

  it('has no route but to the control plane, and nothing listening', async () => {
    // One link out, to the control plane's /30: no default route, no IPv6 but on loopback. The
    // agent's own bridge (tern0, its default) and its containers' links on it stay inside the site.
    const internal = [
      'lo',
      'tern0',
      ...String((await site.run('ip', ['-o', 'link', 'show', 'master', 'tern0'])).stdout)
        .split('\n')
        .map((l: string) => l.split(/[:@]\s*/)[1]),
    ];
    const routes = (await site.routes()).filter((r) => !internal.includes(/\bdev (\S+)/.exec(r)?.[1] ?? ''));
    const network = site.controlPlane.replace(/\d+$/, (o) => String(Number(o) - 1));
    expect(routes).toEqual([expect.stringMatching(new RegExp(`^${network.replaceAll('.', '\\.')}/30 dev `))]);
    expect((await site.routes()).filter((r) => r.startsWith('default'))).toEqual([]);

    // It reaches the gateway; not a host elsewhere, nor this machine's other address, which the
    // root namespace itself reaches.
    const gatewayPort = Number(new URL(stack.gateway).port);
    expect(await site.connect(site.controlPlane, gatewayPort)).toBe('open');
    const elsewhere = await InternetHost.start();
    const listener: Server = createServer((s) => s.destroy());
    try {
      await new Promise<void>((r) => listener.listen(0, '0.0.0.0', r));
      const hostPort = (listener.address() as { port: number }).port;
      const others = [[elsewhere.address, elsewhere.port] as const];
      const hostAddress = ownAddress();
      if (hostAddress) others.push([hostAddress, hostPort]);
      for (const [host, port] of others) {
        expect([host, await reachable(host, port)]).toEqual([host, true]);
        expect([host, await site.connect(host, port)]).toEqual([host, 'ENETUNREACH']);
      }
    } finally {
      listener.close();
      await elsewhere.stop();
    }

    // Nothing listens in the site's namespace but the containers' DNS forwarder on the bridge's own
    // address (the default 10.213.0.0/16), which answers the bridge only: the agent has no port,
    // and each container listens in a namespace of its own that only its agent reaches.
    expect([...new Set(await site.listeners())]).toEqual(['10.213.0.1:53']);
    const running = await api<DeploymentDetail>('/api/v1/deployments/remote-hello');
    const warm = running.body.containers.filter((c) => c.state === 'running').map((c) => c.id);
    const leases = readdirSync(join(agentDir, 'network'))
      .map(
        (f) => JSON.parse(readFileSync(join(agentDir, 'network', f), 'utf8')) as { containerId?: string; netns: string; address: string },
      )
      .filter((l) => l.containerId && warm.includes(l.containerId));
    expect(leases.length).toBeGreaterThan(0);
    for (const lease of leases) {
      const bundle = JSON.parse(readFileSync(join(agentDir, 'runtime', 'containers', lease.containerId!, 'config.json'), 'utf8')) as {
        process: { env: string[] };
      };
      const port = Number(bundle.process.env.find((e) => e.startsWith('PORT='))!.slice(5));
      const listening = (await execa('ip', ['netns', 'exec', lease.netns, 'ss', '-Hltn'])).stdout;
      expect(listening).toMatch(new RegExp(`:${port}\\s`));
      expect(await site.connect(lease.address, port)).toBe('open');
      // From this machine, at the site's address, the port is closed. (Not at the container's own
      // address: the root namespace has no route there but its default one, which leaves the machine.)
      expect(await reachable(site.address, port)).toBe(false);
    }
  }, 120_000);
});
