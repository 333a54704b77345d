/**
 * Sandboxes: (1) time from `POST /api/v1/sandboxes` until the first output of an `exec` in it
 * (placement, the agent's container start, `runc exec`, NATS both ways), next to a bare
 * `runc run --detach` of the very same bundle config.json plus `runc exec … echo` until its
 * output; (2) the round trip of `exec ["true"]` in a running sandbox through the gateway, next
 * to `runc exec <bare container> true`. Interleaved, N runs each; prints the figures; not a test.
 *
 *   npm run build && node dist/bench/sandbox/main.js [--runs 20] [--gateway URL --token T --tern-home DIR]
 *
 * Without --gateway it starts its own stack (as bench/invoke/e2e.ts, private container network)
 * and removes it afterwards. The bare container runs in the host's network namespace (the
 * sandbox's namespace is the agent's). Needs root, runc, nft.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from '../args.js';
import { execa } from 'execa';
import { api, containerConfig, openStack, quantile, type Stack, until } from '../invoke/stack.js';

const values = benchArgs(`Usage: node dist/bench/sandbox/main.js [--runs 20] [--gateway URL --token T --tern-home DIR]`, {
  runs: { type: 'string', default: '20' },
  gateway: { type: 'string' },
  token: { type: 'string' },
  'tern-home': { type: 'string' },
});
const RUNS = Number(values.runs);
const SPEC = { cpu: 0.25, memory: '256Mi', timeout: 600 };

/** POSTs an exec and resolves when its first stdout line (`first`) or its whole answer (`all`) has arrived. */
async function exec(s: Stack, id: string, cmd: string[], until: 'first' | 'all'): Promise<void> {
  const res = await fetch(`${s.gateway}/api/v1/sandboxes/${id}/exec`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ cmd }),
  });
  if (!res.ok) throw new Error(`exec: ${res.status} ${await res.text()}`);
  if (until === 'all') {
    const text = await res.text();
    if (!text.includes('"exit_code":0')) throw new Error(`exec did not succeed: ${text}`);
    return;
  }
  let seen = '';
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
    seen += Buffer.from(chunk).toString('utf8');
    if (seen.includes('"stream":"stdout"')) {
      await res.body?.cancel().catch(() => undefined);
      return;
    }
  }
  throw new Error(`no output from exec: ${seen}`);
}

const stack = await openStack({ network: 'private', gateway: values.gateway, token: values.token, ternHome: values['tern-home'] });
const work = await mkdtemp(join(tmpdir(), 'tern-bench-sandbox-'));
const bareRoot = join(work, 'bare-runc');
const bareIds: string[] = [];
try {
  await until('a ready machine', 180_000, async () =>
    (await api<{ state: string }[]>(stack, 'GET', '/api/v1/machines')).some((m) => m.state === 'ready') ? true : undefined,
  );

  /** (1) through Tern: create, first exec output; then the sandbox is deleted (untimed). */
  const viaTern = async (): Promise<{ ms: number; config?: any }> => {
    const t0 = performance.now();
    const { id } = await api<{ id: string }>(stack, 'POST', '/api/v1/sandboxes', SPEC);
    await exec(stack, id, ['echo', 'hi'], 'first');
    const ms = performance.now() - t0;
    const config = (await containerConfig(stack.ternHome, id).catch(() => undefined))?.config;
    await api(stack, 'DELETE', `/api/v1/sandboxes/${id}`);
    return { ms, config };
  };

  /** The same bundle, run by runc directly in the host's network namespace with its own /workspace. */
  const bareConfig = async (template: any, cid: string) => {
    const bundle = join(work, cid);
    const workspace = join(bundle, 'workspace');
    await mkdir(workspace, { recursive: true });
    await execa('chmod', ['777', workspace]);
    const config = {
      ...template,
      mounts: (template.mounts as { destination: string; source: string }[]).map((m) =>
        m.destination === '/workspace' ? { ...m, source: workspace } : m,
      ),
      linux: {
        ...template.linux,
        namespaces: (template.linux.namespaces as { type: string }[]).filter((n) => n.type !== 'network'),
        cgroupsPath: `/tern/${cid}`,
      },
    };
    await writeFile(join(bundle, 'config.json'), JSON.stringify(config));
    return bundle;
  };
  const bareStart = async (template: any): Promise<{ ms: number; cid: string }> => {
    const cid = `bench-sb-${randomBytes(3).toString('hex')}`;
    const bundle = await bareConfig(template, cid);
    bareIds.push(cid);
    const t0 = performance.now();
    await execa('runc', ['--root', bareRoot, 'run', '--detach', '--bundle', bundle, cid], { stdio: 'ignore' });
    const out = await execa('runc', ['--root', bareRoot, 'exec', cid, 'echo', 'hi']);
    if (out.stdout.trim() !== 'hi') throw new Error(`bare exec answered ${out.stdout}`);
    return { ms: performance.now() - t0, cid };
  };
  const bareRemove = async (cid: string) => {
    await execa('runc', ['--root', bareRoot, 'delete', '--force', cid], { reject: false });
    await rm(join(work, cid), { recursive: true, force: true });
  };

  // Warm-up, untimed: the host image, the page cache, the gateway's and agent's first paths.
  const warm = await viaTern();
  if (!warm.config) throw new Error('could not read the sandbox bundle config.json (pass --tern-home with --gateway)');
  await bareRemove((await bareStart(warm.config)).cid);

  const tern: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    tern.push((await viaTern()).ms);
    const b = await bareStart(warm.config);
    bare.push(b.ms);
    await bareRemove(b.cid);
    console.error(
      `run ${i + 1}/${RUNS}: create → first output ${tern.at(-1)!.toFixed(0)} ms, bare runc run + exec ${bare.at(-1)!.toFixed(0)} ms`,
    );
  }

  // (2) exec round trips in one running sandbox and one running bare container.
  const { id } = await api<{ id: string }>(stack, 'POST', '/api/v1/sandboxes', SPEC);
  const running = await bareStart(warm.config);
  const ternExec: number[] = [];
  const bareExec: number[] = [];
  await exec(stack, id, ['true'], 'all');
  for (let i = 0; i < RUNS; i++) {
    let t0 = performance.now();
    await exec(stack, id, ['true'], 'all');
    ternExec.push(performance.now() - t0);
    t0 = performance.now();
    await execa('runc', ['--root', bareRoot, 'exec', running.cid, 'true']);
    bareExec.push(performance.now() - t0);
  }
  await api(stack, 'DELETE', `/api/v1/sandboxes/${id}`);
  await bareRemove(running.cid);

  const row = (name: string, xs: number[]) =>
    `${name.padEnd(40)}${[0.5, 0.9].map((q) => quantile(xs, q).toFixed(1).padStart(9)).join('')}${Math.min(...xs)
      .toFixed(1)
      .padStart(9)}${Math.max(...xs)
      .toFixed(1)
      .padStart(9)}`;
  console.log(`sandboxes, host image, ${RUNS} runs each, interleaved`);
  console.log(`${''.padEnd(40)}${['median', 'p90', 'min', 'max'].map((h) => h.padStart(9)).join('')}   (ms)`);
  console.log(row('POST /sandboxes → first exec output', tern));
  console.log(row('bare runc run --detach + runc exec', bare));
  console.log(`ratio (median tern / bare): ${(quantile(tern, 0.5) / quantile(bare, 0.5)).toFixed(2)}x`);
  console.log(row('exec ["true"] round trip (gateway)', ternExec));
  console.log(row('runc exec true', bareExec));
  console.log(`ratio (median tern / bare): ${(quantile(ternExec, 0.5) / quantile(bareExec, 0.5)).toFixed(2)}x`);
} finally {
  for (const cid of bareIds) await execa('runc', ['--root', bareRoot, 'delete', '--force', cid], { reject: false });
  await rm(work, { recursive: true, force: true });
  await stack.stop();
}
