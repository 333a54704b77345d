import { roomGrew } from './room.js';
import type { MachineView } from './types.js';

const GiB = 2 ** 30;
const h100 = (index: number) => ({ index, model: 'NVIDIA H100 80GB HBM3' });

/** A ready 4-CPU, 16 GiB machine with two GPUs, holding `used`. */
function machine(over: Partial<MachineView> = {}, used: Partial<MachineView['used']> = {}): MachineView {
  return {
    id: 'm-1',
    pool: 'default',
    state: 'ready',
    capacity: { cpuMillicores: 4000, memoryBytes: 16 * GiB, gpus: [h100(0), h100(1)] },
    used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [], ...used },
    ...over,
  };
}

describe('roomGrew', () => {
  const full = machine({}, { cpuMillicores: 4000, memoryBytes: 14 * GiB, gpuIndexes: [0, 1] });

  it('counts a machine new to the pool, or newly ready, when it is ready', () => {
    expect(roomGrew(undefined, full)).toBe(true);
    expect(roomGrew({ ...full, state: 'offline' }, full)).toBe(true);
    expect(roomGrew({ ...full, state: 'unschedulable' }, full)).toBe(true);
    expect(roomGrew(undefined, { ...full, state: 'registered' })).toBe(false);
  });

  it('counts more free CPU, more free memory, or a GPU freed', () => {
    expect(roomGrew(full, { ...full, used: { ...full.used, cpuMillicores: 3000 } })).toBe(true);
    expect(roomGrew(full, { ...full, used: { ...full.used, memoryBytes: 13 * GiB } })).toBe(true);
    expect(roomGrew(full, { ...full, used: { ...full.used, gpuIndexes: [1] } })).toBe(true);
    // The machine itself grew: a GPU added, more memory registered.
    expect(roomGrew(full, { ...full, capacity: { ...full.capacity, gpus: [h100(0), h100(1), h100(2)] } })).toBe(true);
    expect(roomGrew(full, { ...full, capacity: { ...full.capacity, memoryBytes: 32 * GiB } })).toBe(true);
  });

  it('counts one resource growing even when another shrank', () => {
    const half = machine({}, { cpuMillicores: 2000, memoryBytes: 4 * GiB });
    expect(roomGrew(half, machine({}, { cpuMillicores: 1000, memoryBytes: 8 * GiB }))).toBe(true);
  });

  it('does not count a machine that only filled up, or did not change', () => {
    const half = machine({}, { cpuMillicores: 2000, memoryBytes: 4 * GiB, gpuIndexes: [0] });
    expect(roomGrew(half, half)).toBe(false);
    expect(roomGrew(half, full)).toBe(false);
    // Another GPU taken while one was freed is still a GPU free that was not.
    expect(roomGrew(half, machine({}, { cpuMillicores: 2000, memoryBytes: 4 * GiB, gpuIndexes: [1] }))).toBe(true);
  });

  it('does not count what frees on a machine placement cannot use', () => {
    const freed = { ...full, used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [] } };
    expect(roomGrew(full, { ...freed, state: 'offline' })).toBe(false);
    expect(roomGrew(full, { ...freed, verification: 'quarantined' })).toBe(false);
  });

  it('counts a change of verification (a machine now verified meets a stricter tier)', () => {
    expect(roomGrew(full, { ...full, verification: 'verified' })).toBe(true);
  });

  it('counts memory freed within the system headroom only as far as containers may use it', () => {
    // 16 GiB keeps 1.6 GiB back: 14.4 GiB may be given. Memory used above that is over-full, freeing it gives nothing.
    const over = machine({}, { memoryBytes: 15 * GiB });
    expect(roomGrew(over, machine({}, { memoryBytes: 14.5 * GiB }))).toBe(false);
    expect(roomGrew(over, machine({}, { memoryBytes: 14 * GiB }))).toBe(true);
  });
});
