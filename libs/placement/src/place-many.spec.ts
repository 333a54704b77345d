import { place } from './place.js';
import { placeMany } from './place-many.js';
import { isPlaced, type MachineView, type PlacementRequest, type PlacementResult } from './types.js';

const GiB = 2 ** 30;
const MODELS = ['NVIDIA H100 80GB HBM3', 'NVIDIA A100-SXM4-80GB', 'NVIDIA A100-SXM4-40GB', 'NVIDIA L4'];

/** A small deterministic generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function fleet(rnd: () => number, count: number): MachineView[] {
  const pick = <T>(of: readonly T[]) => of[Math.floor(rnd() * of.length)];
  return Array.from({ length: count }, (_, i): MachineView => {
    const gpuCount = pick([0, 0, 1, 2, 4, 8]);
    const models = rnd() < 0.8 ? [pick(MODELS)] : [pick(MODELS), pick(MODELS)];
    const gpus = Array.from({ length: gpuCount }, (_, index) => ({ index, model: models[index % models.length] }));
    const cpu = pick([4, 8, 16, 32]) * 1000;
    const memory = pick([16, 32, 64, 256]) * GiB;
    const takenGpus = gpus.filter(() => rnd() < 0.3).map((g) => g.index);
    return {
      id: `m-${String(i).padStart(4, '0')}`,
      pool: pick(['default', 'default', 'default', 'gpu']),
      state: pick(['ready', 'ready', 'ready', 'ready', 'offline', 'unschedulable']),
      capacity: { cpuMillicores: cpu, memoryBytes: memory, gpus },
      used: { cpuMillicores: Math.floor(rnd() * cpu * 0.8), memoryBytes: Math.floor(rnd() * memory * 0.6), gpuIndexes: takenGpus },
      ...(rnd() < 0.7 ? { reputation: Math.round(rnd() * 100) / 100 } : {}),
      ...(rnd() < 0.2 ? { holdsImage: true } : {}),
      ...(rnd() < 0.8 ? { verification: pick(['verified', 'verified', 'unverified', 'quarantined'] as const) } : {}),
    };
  });
}

const SHAPES: PlacementRequest[] = [
  { cpuMillicores: 1000, memoryBytes: 2 * GiB, gpuTypes: [], gpuCount: 0, pool: 'default' },
  { cpuMillicores: 4000, memoryBytes: 16 * GiB, gpuTypes: ['H100', 'A100'], gpuCount: 1, pool: 'default' },
  { cpuMillicores: 2000, memoryBytes: 8 * GiB, gpuTypes: [], gpuCount: 2, pool: 'default', minReputation: 0.5 },
  { cpuMillicores: 500, memoryBytes: GiB, gpuTypes: ['A100 40GB'], gpuCount: 1, pool: 'gpu', image: 'r/x@sha256:1' },
  { cpuMillicores: 8000, memoryBytes: 64 * GiB, gpuTypes: ['L4'], gpuCount: 4, pool: 'default' },
  { cpuMillicores: 1000, memoryBytes: 2 * GiB, gpuTypes: [], gpuCount: 0, pool: 'default', verified: true },
  { cpuMillicores: 2000, memoryBytes: 8 * GiB, gpuTypes: ['H100'], gpuCount: 1, pool: 'default', verified: true },
];

/** The reference: place() one request at a time, the chosen machine's usage added after each. */
function oneByOne(requests: readonly PlacementRequest[], machines: readonly MachineView[]): PlacementResult[] {
  const now = [...machines];
  return requests.map((request) => {
    const result = place(request, now);
    if (isPlaced(result)) {
      const i = now.findIndex((m) => m.id === result.machineId);
      const m = now[i];
      now[i] = {
        ...m,
        used: {
          cpuMillicores: m.used.cpuMillicores + request.cpuMillicores,
          memoryBytes: m.used.memoryBytes + request.memoryBytes,
          gpuIndexes: [...m.used.gpuIndexes, ...result.gpuIndexes].sort((a, b) => a - b),
        },
      };
    }
    return result;
  });
}

describe('placeMany', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])('answers as place() one request at a time would (fleet %i)', (seed) => {
    const rnd = random(seed);
    const machines = fleet(rnd, 60);
    const requests = Array.from({ length: 150 }, () => SHAPES[Math.floor(rnd() * SHAPES.length)]);
    const expected = oneByOne(requests, machines);
    expect(expected.some(isPlaced)).toBe(true);
    expect(expected.some((r) => !isPlaced(r))).toBe(true);
    expect(placeMany(requests, machines).results).toEqual(expected);
  });

  it('never gives one GPU to two containers of a batch, nor more CPU than a machine has', () => {
    const machine: MachineView = {
      id: 'm-1',
      pool: 'default',
      state: 'ready',
      capacity: { cpuMillicores: 8000, memoryBytes: 64 * GiB, gpus: [0, 1, 2].map((index) => ({ index, model: MODELS[0] })) },
      used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [] },
    };
    const oneGpu: PlacementRequest = { cpuMillicores: 2000, memoryBytes: GiB, gpuTypes: ['H100'], gpuCount: 1, pool: 'default' };
    const { results, machines } = placeMany([oneGpu, oneGpu, oneGpu, oneGpu], [machine]);
    expect(results.slice(0, 3)).toEqual([0, 1, 2].map((i) => ({ machineId: 'm-1', gpuIndexes: [i], gpuType: 'H100' })));
    expect(results[3]).toEqual({ reason: 'not enough free GPUs: needs gpu H100, the most free is 0 (m-1)' });
    expect(machines[0].used).toEqual({ cpuMillicores: 6000, memoryBytes: 3 * GiB, gpuIndexes: [0, 1, 2] });
  });

  it('leaves the given machines as they were', () => {
    const machines = fleet(random(9), 10);
    const before = JSON.stringify(machines);
    placeMany([SHAPES[0], SHAPES[0]], machines);
    expect(JSON.stringify(machines)).toBe(before);
  });
});
