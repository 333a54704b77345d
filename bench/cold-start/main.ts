/**
 * Scale-from-zero: time from a request to /endpoint/<name> with no container running until its
 * response (the gateway asks for a container, the autoscaler and scheduler place it, the agent
 * starts it under runc, the Python runner loads the handler, the request is forwarded), next to
 * a bare `runc run --detach` of the very same bundle config.json (copied from the agent's
 * container, own port and cgroup) until its first successful POST /. Interleaved, N runs each,
 * one run. Prints the figures and the ratio; not a test.
 *
 *   npm run build && node dist/bench/cold-start/main.js [--runs 5] [--network private,host] [--gateway URL --token T [--tern-home DIR]]
 *
 * Without --gateway it starts its own stack (as bench/invoke/e2e.ts) per container network mode
 * (the agent's AGENT_NETWORK: private, its own namespace on the agent's bridge; host, the
 * machine's), back to back, and removes each afterwards. The bare run is the same bundle in the
 * host's network namespace (the private one's namespace belongs to the agent's container): the
 * ratio for `private` includes the whole cost of the private network. Needs root, runc, nft.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from '../args.js';
import { execa } from 'execa';
import { freePort } from '#tern/runtime';
import {
  api,
  type BenchNetwork,
  benchNetworks,
  containerConfig,
  deploy,
  type DeploymentView,
  openStack,
  post,
  quantile,
  sleep,
  until,
} from '../invoke/stack.js';

const values = benchArgs(
  `Usage: node dist/bench/cold-start/main.js [--runs 5] [--network private,host] [--gateway URL --token T [--tern-home DIR]]`,
  {
    runs: { type: 'string', default: '5' },
    gateway: { type: 'string' },
    token: { type: 'string' },
    'tern-home': { type: 'string' },
    name: { type: 'string', default: 'bench-cold' },
    network: { type: 'string', default: 'private,host' },
  },
);
const RUNS = Number(values.runs);
const NAME = values.name!;
const BODY = Buffer.from(JSON.stringify({ name: 'Ada' }));

/** One mode's figures (ms). */
interface Measured {
  tern: number[];
  bare: number[];
  drain: number[];
  isolation: string;
}

async function measure(network: BenchNetwork | undefined): Promise<Measured> {
  const stack = await openStack({ gateway: values.gateway, token: values.token, ternHome: values['tern-home'], network });
  const work = await mkdtemp(join(tmpdir(), 'tern-bench-cold-'));
  const bareRoot = join(work, 'runc');
  try {
    // Like examples/hello-python: 0.5 CPU, 256 MiB, one worker; idle 2 s, then scaled to zero.
    await deploy(
      stack,
      NAME,
      `workers: 1\ncpu: 0.5\nmemory: 256Mi\nkeep_warm_seconds: 2\nautoscaler:\n  type: queue_depth\n  max_containers: 1\n`,
    );
    const gw = { url: `${stack.gateway}/endpoint/${NAME}`, headers: { authorization: `Bearer ${stack.token}` } };

    const atZero = async () => {
      const t0 = performance.now();
      await until(
        '0 actual containers',
        120_000,
        async () => {
          const v = await api<DeploymentView>(stack, 'GET', `/api/v1/deployments/${NAME}`);
          return v.actual === 0 && v.desired === 0 && v.containers.length === 0 ? v : undefined;
        },
        200,
      );
      return performance.now() - t0;
    };

    /** One request with a fresh connection, timed until its answer; 200 required. */
    const viaGateway = async (): Promise<{ ms: number; containerId: string }> => {
      const agent = new Agent({ keepAlive: false });
      const t0 = performance.now();
      const r = await post(agent, gw, BODY);
      const ms = performance.now() - t0;
      agent.destroy();
      if (r.status !== 200) throw new Error(`cold request answered ${r.status}: ${r.body}`);
      return { ms, containerId: String(r.headers['x-tern-container-id'] ?? '') };
    };

    /**
     * The agent's config.json with its own port and cgroup, in the host's network namespace
     * (the agent's private one goes with its container), `runc run --detach`, poll POST / until 200.
     */
    const bareRunc = async (template: any): Promise<number> => {
      const cid = `bench-bare-${randomBytes(3).toString('hex')}`;
      const bundle = join(work, cid);
      const port = await freePort();
      const config = {
        ...template,
        process: { ...template.process, env: (template.process.env as string[]).map((e) => (e.startsWith('PORT=') ? `PORT=${port}` : e)) },
        linux: {
          ...template.linux,
          namespaces: (template.linux.namespaces as { type: string }[]).filter((n) => n.type !== 'network'),
          cgroupsPath: `/tern/${cid}`,
        },
      };
      await mkdir(bundle, { recursive: true });
      await writeFile(join(bundle, 'config.json'), JSON.stringify(config));
      const agent = new Agent({ keepAlive: false });
      const t0 = performance.now();
      try {
        await execa('runc', ['--root', bareRoot, 'run', '--detach', '--bundle', bundle, cid], { stdio: 'ignore' });
        for (;;) {
          const r = await post(agent, { url: `http://127.0.0.1:${port}/` }, BODY).catch(() => undefined);
          if (r?.status === 200) return performance.now() - t0;
          if (performance.now() - t0 > 30_000) throw new Error('bare runc container did not answer in 30 s');
          await sleep(2);
        }
      } finally {
        agent.destroy();
        await execa('runc', ['--root', bareRoot, 'delete', '--force', cid], { reject: false });
        await rm(bundle, { recursive: true, force: true });
      }
    };

    // Warm-up (untimed): the first start extracts the code bundle and builds the host image.
    await atZero();
    const warm = await viaGateway();
    const { config } = await containerConfig(stack.ternHome, warm.containerId);
    const namespaces = (config.linux.namespaces as { type: string; path?: string }[]).map((n) => n.type);
    const isolation = `network ${namespaces.includes('network') ? 'private' : 'host'}, user namespace ${namespaces.includes('user') ? 'on' : 'off'}`;
    await bareRunc(config);

    const out: Measured = { tern: [], bare: [], drain: [], isolation };
    for (let i = 0; i < RUNS; i++) {
      out.drain.push(await atZero());
      await sleep(500); // let the stopped container's teardown settle
      const g = await viaGateway();
      out.tern.push(g.ms);
      out.bare.push(await bareRunc(config));
      console.error(
        `[${isolation}] run ${i + 1}/${RUNS}: gateway cold ${g.ms.toFixed(0)} ms, bare runc ${out.bare.at(-1)!.toFixed(0)} ms (scale-down took ${out.drain.at(-1)!.toFixed(0)} ms)`,
      );
    }
    return out;
  } finally {
    await api(stack, 'DELETE', `/api/v1/deployments/${NAME}`).catch(() => undefined);
    const left = await execa('runc', ['--root', bareRoot, 'list', '-q'], { reject: false });
    for (const id of (left.stdout ?? '').split('\n').filter(Boolean))
      await execa('runc', ['--root', bareRoot, 'delete', '--force', id], { reject: false });
    await rm(work, { recursive: true, force: true });
    await stack.stop();
  }
}

const modes = values.gateway ? [undefined] : benchNetworks(values.network!);
const results: Measured[] = [];
for (const mode of modes) results.push(await measure(mode));

const row = (name: string, xs: number[]) =>
  `${name.padEnd(34)}${[0.5].map((q) => quantile(xs, q).toFixed(1).padStart(9)).join('')}${Math.min(...xs)
    .toFixed(1)
    .padStart(9)}${Math.max(...xs)
    .toFixed(1)
    .padStart(9)}`;
console.log(`cold start to first response (Python runner, tiny handler, host image), ${RUNS} runs each, interleaved`);
for (const r of results) {
  console.log(`\n${r.isolation}`);
  console.log(`${''.padEnd(34)}${['median', 'min', 'max'].map((h) => h.padStart(9)).join('')}   (ms)`);
  console.log(row('gateway, scale from zero', r.tern));
  console.log(row('bare runc run --detach, same bundle', r.bare));
  console.log(
    `ratio (median gateway / bare): ${(quantile(r.tern, 0.5) / quantile(r.bare, 0.5)).toFixed(2)}x; extra ${(quantile(r.tern, 0.5) - quantile(r.bare, 0.5)).toFixed(0)} ms`,
  );
  console.log(
    `(not timed: idle → 0 actual containers took median ${(quantile(r.drain, 0.5) / 1000).toFixed(1)} s with keep_warm_seconds 2)`,
  );
}
if (results.length === 2)
  console.log(
    `\n${results[0].isolation} vs ${results[1].isolation}: median cold start ${quantile(results[0].tern, 0.5).toFixed(0)} vs ${quantile(results[1].tern, 0.5).toFixed(0)} ms (${(quantile(results[0].tern, 0.5) - quantile(results[1].tern, 0.5)).toFixed(0)} ms)`,
  );
process.exit(0);
