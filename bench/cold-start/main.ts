/**
 * Scale-from-zero: time from a request to /endpoint/<name> with no container running until its
 * response (the gateway asks for a container, the autoscaler and scheduler place it, the agent
 * starts it under runc, the Python runner loads the handler, the request is forwarded), next to
 * a bare `runc run --detach` of the very same bundle config.json (copied from the agent's
 * container, own port and cgroup) until its first successful POST /. Interleaved, N runs each,
 * one run. Prints the figures and the ratio; not a test.
 *
 *   npm run build && node dist/bench/cold-start/main.js [--runs 5] [--gateway URL --token T [--tern-home DIR]]
 *
 * Without --gateway it starts its own stack (as bench/invoke/e2e.ts) and removes it afterwards.
 * Needs root and runc.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { freePort } from '#tern/runtime';
import { api, containerConfig, deploy, type DeploymentView, openStack, post, quantile, sleep, until } from '../invoke/stack.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    gateway: { type: 'string' },
    token: { type: 'string' },
    'tern-home': { type: 'string' },
    name: { type: 'string', default: 'bench-cold' },
  },
});
const RUNS = Number(values.runs);
const NAME = values.name!;
const BODY = Buffer.from(JSON.stringify({ name: 'Ada' }));

const stack = await openStack({ gateway: values.gateway, token: values.token, ternHome: values['tern-home'] });
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

  /** The agent's config.json with its own port and cgroup, `runc run --detach`, poll POST / until 200. */
  const bareRunc = async (template: any): Promise<number> => {
    const cid = `bench-bare-${randomBytes(3).toString('hex')}`;
    const bundle = join(work, cid);
    const port = await freePort();
    const config = {
      ...template,
      process: { ...template.process, env: (template.process.env as string[]).map((e) => (e.startsWith('PORT=') ? `PORT=${port}` : e)) },
      linux: { ...template.linux, cgroupsPath: `/tern/${cid}` },
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
  await bareRunc(config);

  const tern: number[] = [];
  const bare: number[] = [];
  const drain: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    drain.push(await atZero());
    await sleep(500); // let the stopped container's teardown settle
    const g = await viaGateway();
    tern.push(g.ms);
    bare.push(await bareRunc(config));
    console.error(
      `run ${i + 1}/${RUNS}: gateway cold ${g.ms.toFixed(0)} ms, bare runc ${bare.at(-1)!.toFixed(0)} ms (scale-down took ${drain.at(-1)!.toFixed(0)} ms)`,
    );
  }
  const row = (name: string, xs: number[]) =>
    `${name.padEnd(34)}${[0.5].map((q) => quantile(xs, q).toFixed(1).padStart(9)).join('')}${Math.min(...xs)
      .toFixed(1)
      .padStart(9)}${Math.max(...xs)
      .toFixed(1)
      .padStart(9)}`;
  console.log(`cold start to first response (Python runner, tiny handler, host image), ${RUNS} runs each, interleaved`);
  console.log(`${''.padEnd(34)}${['median', 'min', 'max'].map((h) => h.padStart(9)).join('')}   (ms)`);
  console.log(row('gateway, scale from zero', tern));
  console.log(row('bare runc run --detach, same bundle', bare));
  console.log(
    `ratio (median gateway / bare): ${(quantile(tern, 0.5) / quantile(bare, 0.5)).toFixed(2)}x; extra ${(quantile(tern, 0.5) - quantile(bare, 0.5)).toFixed(0)} ms`,
  );
  console.log(`(not timed: idle → 0 actual containers took median ${(quantile(drain, 0.5) / 1000).toFixed(1)} s with keep_warm_seconds 2)`);
} finally {
  await api(stack, 'DELETE', `/api/v1/deployments/${NAME}`).catch(() => undefined);
  const left = await execa('runc', ['--root', bareRoot, 'list', '-q'], { reject: false });
  for (const id of (left.stdout ?? '').split('\n').filter(Boolean))
    await execa('runc', ['--root', bareRoot, 'delete', '--force', id], { reject: false });
  await rm(work, { recursive: true, force: true });
  await stack.stop();
}
process.exit(0);
