/**
 * The top frames of a V8 CPU profile (`node --cpu-prof`), by self time, and the same time
 * summed per package (`node_modules/<name>`, Tern's own `apps/…`/`libs/…` files, node's
 * internals): where a service spends its CPU under a bench's load.
 *
 *   node dist/bench/invoke/cpu-top.js <file.cpuprofile> [--top 25]
 *
 * bench/invoke/README.md shows how the gateway's profile is taken and keeps its top frames.
 */
import { readFile } from 'node:fs/promises';
import { benchCommand } from '../args.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = benchCommand(
  `Usage: node dist/bench/invoke/cpu-top.js <file.cpuprofile> [--top 25]`,
  { top: { type: 'string', default: '25' } },
  { min: 1, max: 1 },
);
const profile = JSON.parse(await readFile(positionals[0]!, 'utf8')) as CpuProfile;

/** Microseconds of self time per profile node id (a sample's delta is the time until the next one). */
function selfTimes(p: CpuProfile): Map<number, number> {
  const out = new Map<number, number>();
  p.samples.forEach((id, i) => out.set(id, (out.get(id) ?? 0) + (p.timeDeltas[i + 1] ?? 0)));
  return out;
}

/** `fastify`, `@nestjs/core`, `tern apps/gateway`, `node:internal`…: who owns a frame's code. */
function owner(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return 'node:internal';
  const own = /\/dist\/((?:apps|libs)\/[^/]+)/.exec(url);
  return own ? `tern ${own[1]}` : url;
}

const times = selfTimes(profile);
const total = [...times.values()].reduce((a, b) => a + b, 0);
const byFrame = new Map<string, number>();
const byOwner = new Map<string, number>();
for (const node of profile.nodes) {
  const us = times.get(node.id) ?? 0;
  if (!us) continue;
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/^.*\/(node_modules|dist)\//, '');
  const frame = `${functionName || '(anonymous)'} ${file ? `${file}:${lineNumber + 1}` : ''}`.trim();
  byFrame.set(frame, (byFrame.get(frame) ?? 0) + us);
  const who = owner(url, functionName);
  byOwner.set(who, (byOwner.get(who) ?? 0) + us);
}

const top = Number(values.top);
const pct = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)} %`;
console.log(`${(total / 1e6).toFixed(1)} s sampled\n\nself time by frame`);
for (const [frame, us] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${frame}`);
console.log('\nself time by owner');
for (const [who, us] of [...byOwner].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${who}`);
