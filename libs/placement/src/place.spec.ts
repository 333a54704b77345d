import { backoffMs } from '#tern/timing';
import { PLACEMENT_BACKOFF } from './backoff.js';
import { gpuPhrase, place } from './place.js';
import { formatBytes, formatCpu, fullnessAfter, memoryHeadroom, pickGpus } from './resources.js';
import { DEFAULT_PLACEMENT_OPTIONS, isPlaced, type MachineView, type PlacementRequest } from './types.js';
import { capacityOf, usageOf } from './usage.js';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const h100 = (index: number) => ({ index, model: 'NVIDIA H100 80GB HBM3' });
const a100 = (index: number) => ({ index, model: 'NVIDIA A100-SXM4-80GB' });

function machine(
  id: string,
  over: Partial<MachineView> & { cpu?: number; memory?: number; gpus?: MachineView['capacity']['gpus'] } = {},
): MachineView {
  const { cpu = 16, memory = 64 * GiB, gpus = [], ...rest } = over;
  return {
    id,
    pool: 'default',
    state: 'ready',
    capacity: { cpuMillicores: cpu * 1000, memoryBytes: memory, gpus },
    used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [] },
    ...rest,
  };
}

const cpuOnly: PlacementRequest = { cpuMillicores: 1000, memoryBytes: GiB, gpuTypes: [], gpuCount: 0, pool: 'default' };
const oneGpu = (...gpuTypes: string[]): PlacementRequest => ({ ...cpuOnly, gpuTypes, gpuCount: 1 });

describe('place: filters', () => {
  it('needs a ready machine in the pool', () => {
    expect(place(cpuOnly, [])).toEqual({ reason: 'no ready machine in pool default' });
    expect(
      place(cpuOnly, [machine('m-1', { state: 'offline' }), machine('m-2', { pool: 'gpu' }), machine('m-3', { state: 'unschedulable' })]),
    ).toEqual({
      reason: 'no ready machine in pool default',
    });
    expect(place({ ...cpuOnly, pool: 'gpu' }, [machine('m-2', { pool: 'gpu' })])).toEqual({ machineId: 'm-2', gpuIndexes: [] });
  });

  it('needs GPUs of an acceptable type, in the number asked', () => {
    const machines = [machine('m-1', { pool: 'gpu', gpus: [h100(0)] })];
    expect(place({ ...oneGpu('A100'), pool: 'gpu' }, machines)).toEqual({ reason: 'no ready machine in pool gpu with gpu A100' });
    expect(place({ ...oneGpu('A100', 'A10G'), gpuCount: 2, pool: 'gpu' }, machines)).toEqual({
      reason: 'no ready machine in pool gpu with 2× gpu A100 or A10G',
    });
    expect(place({ ...oneGpu(), gpuCount: 2, pool: 'gpu' }, machines)).toEqual({ reason: 'no ready machine in pool gpu with 2 GPUs' });
    expect(place(oneGpu(), [machine('m-1')])).toEqual({ reason: 'no ready machine in pool default with a GPU' });
    expect(place({ ...oneGpu('H100'), pool: 'gpu' }, machines)).toEqual({ machineId: 'm-1', gpuIndexes: [0], gpuType: 'H100' });
  });

  it('does not mix GPU models in one container', () => {
    const mixed = machine('m-1', { gpus: [h100(0), a100(1)] });
    expect(place({ ...oneGpu(), gpuCount: 2 }, [mixed])).toEqual({ reason: 'no ready machine in pool default with 2 GPUs' });
    expect(place({ ...oneGpu('H100', 'A100'), gpuCount: 2 }, [mixed])).toMatchObject({
      reason: expect.stringContaining('no ready machine'),
    });
  });

  it('skips machines below the minimum reputation; unscored machines pass', () => {
    const low = machine('m-1', { reputation: 0.5 });
    expect(place({ ...cpuOnly, minReputation: 0.8 }, [low, machine('m-2', { reputation: 0.7 })])).toEqual({
      reason: 'no machine in pool default has the minimum reputation 0.8: the best is 0.7 (m-2)',
    });
    expect(place({ ...cpuOnly, minReputation: 0.8 }, [low, machine('m-3')])).toEqual({ machineId: 'm-3', gpuIndexes: [] });
    expect(place({ ...cpuOnly, minReputation: 0.5 }, [low])).toEqual({ machineId: 'm-1', gpuIndexes: [] });
  });

  it('needs enough free GPUs, naming the machine with the most', () => {
    const busy = machine('m-1', { gpus: [h100(0), h100(1)], used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [0] } });
    const full = machine('m-2', { gpus: [h100(0)], used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [0] } });
    expect(place({ ...oneGpu('H100'), gpuCount: 2 }, [busy, full])).toEqual({
      reason: 'not enough free GPUs: needs 2× gpu H100, the most free is 1 (m-1)',
    });
    expect(place(oneGpu('H100'), [busy, full])).toEqual({ machineId: 'm-1', gpuIndexes: [1], gpuType: 'H100' });
  });

  it('needs enough free CPU', () => {
    const m = machine('m-1', { cpu: 4, used: { cpuMillicores: 2500, memoryBytes: 0, gpuIndexes: [] } });
    expect(place({ ...cpuOnly, cpuMillicores: 2000 }, [m, machine('m-2', { cpu: 1 })])).toEqual({
      reason: 'not enough free CPU: needs 2 cores, the most free is 1.5 cores (m-1)',
    });
    expect(place({ ...cpuOnly, cpuMillicores: 1500 }, [m])).toMatchObject({ machineId: 'm-1' });
  });

  it('needs enough free memory after the headroom', () => {
    // 8 GiB machine: 819 MiB headroom (10 %), 2 GiB used → 5.2 GiB free.
    const m = machine('m-1', { memory: 8 * GiB, used: { cpuMillicores: 0, memoryBytes: 2 * GiB, gpuIndexes: [] } });
    expect(place({ ...cpuOnly, memoryBytes: 6 * GiB }, [m])).toEqual({
      reason: 'not enough free memory: needs 6 GiB, the most free is 5.2 GiB (m-1)',
    });
    expect(place({ ...cpuOnly, memoryBytes: 5 * GiB }, [m])).toMatchObject({ machineId: 'm-1' });
    // A 4 GiB machine keeps the 512 MiB floor, not 10 %.
    expect(place({ ...cpuOnly, memoryBytes: 4 * GiB }, [machine('m-2', { memory: 4 * GiB })])).toEqual({
      reason: 'not enough free memory: needs 4 GiB, the most free is 3.5 GiB (m-2)',
    });
  });

  it('names the constraint that binds among machines that passed the earlier filters', () => {
    // m-1 lacks CPU, m-2 lacks memory: CPU is checked first and m-2 has enough of it, so memory binds.
    const m1 = machine('m-1', { cpu: 1 });
    const m2 = machine('m-2', { memory: 2 * GiB });
    expect(place({ ...cpuOnly, cpuMillicores: 2000, memoryBytes: 4 * GiB }, [m1, m2])).toEqual({
      reason: 'not enough free memory: needs 4 GiB, the most free is 1.5 GiB (m-2)',
    });
  });

  it('treats a machine that has not reported its size as having nothing', () => {
    const unknown: MachineView = { ...machine('m-1'), capacity: capacityOf({ cpuThreads: null, memoryBytes: null, gpus: null }) };
    expect(place(cpuOnly, [unknown])).toEqual({ reason: 'not enough free CPU: needs 1 core, the most free is 0 cores (m-1)' });
  });
});

describe('place: ranking', () => {
  it("prefers the earlier GPU type in the user's list, whatever the fit", () => {
    const a = machine('m-a', { gpus: [a100(0)] });
    const h = machine('m-h', { gpus: [h100(0), h100(1)], used: { cpuMillicores: 15_000, memoryBytes: 0, gpuIndexes: [1] } });
    expect(place(oneGpu('H100', 'A100'), [a, h])).toEqual({ machineId: 'm-h', gpuIndexes: [0], gpuType: 'H100' });
    expect(place(oneGpu('A100', 'H100'), [a, h])).toEqual({ machineId: 'm-a', gpuIndexes: [0], gpuType: 'A100' });
    // The preferred type has no free GPU left: the next type is used.
    const hFull = { ...h, used: { ...h.used, gpuIndexes: [0, 1] } };
    expect(place(oneGpu('H100', 'A100'), [a, hFull])).toEqual({ machineId: 'm-a', gpuIndexes: [0], gpuType: 'A100' });
  });

  it('with any GPU type, takes one model and says which', () => {
    expect(place(oneGpu(), [machine('m-1', { gpus: [a100(0), h100(1)] })])).toEqual({
      machineId: 'm-1',
      gpuIndexes: [0],
      gpuType: 'NVIDIA A100-SXM4-80GB',
    });
  });

  it('keeps CPU-only containers off GPU machines when a machine without GPUs fits', () => {
    const gpuBox = machine('m-1', { gpus: [h100(0)], used: { cpuMillicores: 8000, memoryBytes: 0, gpuIndexes: [] } });
    expect(place(cpuOnly, [gpuBox, machine('m-2')])).toEqual({ machineId: 'm-2', gpuIndexes: [] });
    expect(place(cpuOnly, [gpuBox])).toEqual({ machineId: 'm-1', gpuIndexes: [] });
  });

  it('packs onto the fullest machine that still fits, so idle machines drain', () => {
    const idle = machine('m-1');
    const half = machine('m-2', { used: { cpuMillicores: 8000, memoryBytes: GiB, gpuIndexes: [] } });
    const almost = machine('m-3', { used: { cpuMillicores: 15_500, memoryBytes: GiB, gpuIndexes: [] } });
    expect(place(cpuOnly, [idle, half, almost])).toEqual({ machineId: 'm-2', gpuIndexes: [] });
    expect(place({ ...cpuOnly, cpuMillicores: 500 }, [idle, half, almost])).toEqual({ machineId: 'm-3', gpuIndexes: [] });
  });

  it('prefers a machine that holds the image over a fuller one, but not over the GPU rules', () => {
    const image = `r.example.com/a/b@sha256:${'c'.repeat(64)}`;
    const fuller = machine('m-1', { used: { cpuMillicores: 12_000, memoryBytes: GiB, gpuIndexes: [] } });
    const holder = machine('m-2', { holdsImage: true });
    expect(place({ ...cpuOnly, image }, [fuller, holder])).toEqual({ machineId: 'm-2', gpuIndexes: [] });
    expect(place(cpuOnly, [fuller, machine('m-2')])).toEqual({ machineId: 'm-1', gpuIndexes: [] });
    // A CPU-only container still stays off a GPU machine that holds its image.
    const gpuHolder = machine('m-3', { gpus: [h100(0)], holdsImage: true });
    expect(place({ ...cpuOnly, image }, [gpuHolder, machine('m-4')])).toEqual({ machineId: 'm-4', gpuIndexes: [] });
    // The user's GPU preference comes first.
    const a100Holder = machine('m-5', { gpus: [a100(0)], holdsImage: true });
    expect(place({ ...oneGpu('H100', 'A100'), image }, [a100Holder, machine('m-6', { gpus: [h100(0)] })])).toMatchObject({
      machineId: 'm-6',
    });
  });

  it('measures fullness by the resource closest to running out', () => {
    const request = { ...cpuOnly, memoryBytes: 0, cpuMillicores: 0 };
    const m = machine('m-1', {
      cpu: 10,
      memory: 10 * GiB,
      gpus: [h100(0), h100(1)],
      used: { cpuMillicores: 5000, memoryBytes: 0, gpuIndexes: [0] },
    });
    expect(fullnessAfter(m, request, DEFAULT_PLACEMENT_OPTIONS)).toBe(0.5);
    expect(fullnessAfter(m, { ...request, gpuCount: 1 }, DEFAULT_PLACEMENT_OPTIONS)).toBe(1);
    expect(fullnessAfter(machine('m-2', { cpu: 0 }), request, DEFAULT_PLACEMENT_OPTIONS)).toBe(1);
  });

  it('breaks a tie of fit by reputation, then by id', () => {
    expect(place(cpuOnly, [machine('m-1', { reputation: 0.7 }), machine('m-2', { reputation: 0.9 }), machine('m-0')])).toMatchObject({
      machineId: 'm-2',
    });
    expect(place(cpuOnly, [machine('m-b'), machine('m-a'), machine('m-c')])).toMatchObject({ machineId: 'm-a' });
  });

  it('takes the lowest free GPU indexes', () => {
    const m = machine('m-1', {
      gpus: [h100(3), h100(0), h100(1), h100(2)],
      used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [0, 2] },
    });
    expect(place({ ...oneGpu('H100'), gpuCount: 2 }, [m])).toEqual({ machineId: 'm-1', gpuIndexes: [1, 3], gpuType: 'H100' });
  });

  it('never places what does not fit, container after container', () => {
    let m = machine('m-1', { cpu: 4, memory: 8 * GiB, gpus: [h100(0), h100(1)] });
    const request = { ...oneGpu('H100'), cpuMillicores: 1000, memoryBytes: 2 * GiB };
    const placed: number[][] = [];
    for (;;) {
      const result = place(request, [m]);
      if (!isPlaced(result)) {
        expect(result.reason).toBe('not enough free GPUs: needs gpu H100, the most free is 0 (m-1)');
        break;
      }
      placed.push(result.gpuIndexes);
      m = { ...m, used: usageOf([m.used, { cpuMillicores: 1000, memoryBytes: 2 * GiB, gpuIndexes: result.gpuIndexes }]) };
    }
    expect(placed).toEqual([[0], [1]]);
  });
});

describe('helpers', () => {
  it('keeps 10 % or 512 MiB of memory, at most half', () => {
    expect(memoryHeadroom(64 * GiB, DEFAULT_PLACEMENT_OPTIONS)).toBeCloseTo(6.4 * GiB);
    expect(memoryHeadroom(2 * GiB, DEFAULT_PLACEMENT_OPTIONS)).toBe(512 * MiB);
    expect(memoryHeadroom(512 * MiB, DEFAULT_PLACEMENT_OPTIONS)).toBe(256 * MiB);
  });

  it('sums usage, counting each GPU once', () => {
    expect(usageOf([])).toEqual({ cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [] });
    expect(usageOf([{ cpuMillicores: 500, memoryBytes: MiB, gpuIndexes: [2] }, { gpuIndexes: [0, 2] }, {}])).toEqual({
      cpuMillicores: 500,
      memoryBytes: MiB,
      gpuIndexes: [0, 2],
    });
  });

  it('reads capacity from a machine row', () => {
    expect(capacityOf({ cpuThreads: 16, memoryBytes: GiB, gpus: [{ index: 0, model: 'X', memoryBytes: 1 } as never] })).toEqual({
      cpuMillicores: 16_000,
      memoryBytes: GiB,
      gpus: [{ index: 0, model: 'X' }],
    });
  });

  it('picks nothing for a CPU-only request and nothing when too few match', () => {
    expect(pickGpus([h100(0)], { gpuTypes: [], gpuCount: 0 })).toEqual({ rank: 0, indexes: [] });
    expect(pickGpus([h100(0)], { gpuTypes: ['A100'], gpuCount: 1 })).toBeUndefined();
    expect(pickGpus([], { gpuTypes: [], gpuCount: 1 })).toBeUndefined();
  });

  it('words sizes and GPU asks for people', () => {
    expect(formatBytes(4 * GiB)).toBe('4 GiB');
    expect(formatBytes(1.25 * GiB)).toBe('1.3 GiB');
    expect(formatBytes(300 * MiB)).toBe('300 MiB');
    expect(formatCpu(1000)).toBe('1 core');
    expect(formatCpu(250)).toBe('0.25 cores');
    expect(gpuPhrase({ gpuTypes: ['A100'], gpuCount: 1 })).toBe('gpu A100');
    expect(gpuPhrase({ gpuTypes: [], gpuCount: 3 })).toBe('3 GPUs');
  });

  it('backs off from 1 s, doubling, up to 30 s', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 50].map((n) => backoffMs(n, PLACEMENT_BACKOFF))).toEqual([
      0, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000,
    ]);
  });
});
