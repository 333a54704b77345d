/**
 * The services' own work per heartbeat and per scoring pass, in one process, each beside its
 * floor measured in the same run (issue 32): the step rows of main.ts give CPU per beat for the
 * whole service, which a shared machine's load blurs; these ratios it does not.
 *
 *   node dist/bench/agents/per-beat.js [--beats 20000] [--machines 5000] [--rounds 3]
 */
import 'reflect-metadata';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { MachineHeartbeat } from '#tern/contracts';
import { decode } from '#tern/messaging';
import { applyHeartbeat, applyStartOutcome, applyState, DEFAULT_PARAMS, newMachineRecord, scoreMachines } from '#tern/reputation';

const { values } = parseArgs({
  options: {
    beats: { type: 'string', default: '20000' },
    machines: { type: 'string', default: '5000' },
    rounds: { type: 'string', default: '3' },
  },
});
const beats = Number(values.beats);
const machines = Number(values.machines);
const rounds = Number(values.rounds);

/** The payload an agent with 8 GPUs sends (~700 B), as bench/agents' fleet sends it. */
const body = new TextEncoder().encode(
  JSON.stringify({
    machineId: 'm-000001',
    pool: 'default',
    sentAt: new Date().toISOString(),
    sequence: 42,
    cpuPercent: 12.5,
    memoryPercent: 40,
    gpus: Array.from({ length: 8 }, (_, index) => ({ index, model: 'NVIDIA H100 80GB HBM3', memoryMiB: 81559, state: 'free' })),
    runningContainers: [],
    agentVersion: '0.9.0',
    isolation: { runtime: 'runc', network: 'private', userNamespaces: true },
  }),
);
const text = new TextDecoder();

/** µs per call of `f`, the best of `rounds` rounds of `n` calls (the least disturbed by other processes). */
async function perCall(n: number, f: () => unknown): Promise<number> {
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await f();
    best = Math.min(best, Number(process.hrtime.bigint() - t) / n / 1000);
  }
  return best;
}

const floor = await perCall(beats, () => JSON.parse(text.decode(body)) as unknown);
const classValidator = await perCall(beats, async () => {
  const errors = await validate(plainToInstance(MachineHeartbeat, JSON.parse(text.decode(body)) as object), {
    whitelist: true,
    forbidNonWhitelisted: true,
  });
  if (errors.length) throw new Error('refused');
});
const compiled = await perCall(beats, async () => {
  if (!(await decode(MachineHeartbeat, body)).ok) throw new Error('refused');
});

const now = Date.now();
const fleet = Array.from({ length: machines }, (_, i) => {
  const r = newMachineRecord(`m-${i}`, `pool-${i % 4}`);
  applyState(r, true, now - 3 * 86_400_000, now);
  for (let b = 0; b < 30; b++) applyHeartbeat(r, b + 1, now - (30 - b) * 10_000, DEFAULT_PARAMS);
  applyStartOutcome(r, `c-${i}`, `d-${i % 50}`, i % 7 ? 'success' : 'shared', now - 3_600_000, DEFAULT_PARAMS, 1000 + (i % 13) * 300);
  return r;
});
const changed = fleet.filter((_, i) => i % 100 === 0);
const everyMachine = (await perCall(3, () => scoreMachines(fleet, now, DEFAULT_PARAMS))) / 1000;
const onlyChanged = (await perCall(3, () => scoreMachines(fleet, now, DEFAULT_PARAMS, changed))) / 1000;

console.log(
  `load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}; best of ${rounds} rounds`,
);
console.log(`heartbeat decode (${beats} beats): JSON.parse alone (floor) ${floor.toFixed(1)} µs`);
console.log(`  class-validator path ${classValidator.toFixed(1)} µs = ${(classValidator / floor).toFixed(1)}x the floor`);
console.log(
  `  compiled validator   ${compiled.toFixed(1)} µs = ${(compiled / floor).toFixed(1)}x the floor, ${(classValidator / compiled).toFixed(1)}x faster`,
);
console.log(`scoring pass, ${machines} machines: every machine ${everyMachine.toFixed(1)} ms (floor)`);
console.log(
  `  the ${changed.length} changed alone, same peers ${onlyChanged.toFixed(1)} ms = ${(onlyChanged / everyMachine).toFixed(2)}x the full pass`,
);
