import { place } from './place.js';
import { needsVerifiedMachine } from './trust.js';
import type { MachineView, PlacementRequest } from './types.js';
import { capacityOf } from './usage.js';

const GiB = 2 ** 30;
const request: PlacementRequest = { cpuMillicores: 1000, memoryBytes: GiB, gpuTypes: [], gpuCount: 0, pool: 'p' };

function machine(id: string, verification?: MachineView['verification']): MachineView {
  return {
    id,
    pool: 'p',
    state: 'ready',
    capacity: capacityOf({ cpuThreads: 4, memoryBytes: 8 * GiB, gpus: [] }),
    used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [] },
    ...(verification ? { verification } : {}),
  };
}

describe('trust tiers', () => {
  it('asks for verified machines when a workload holds secrets, volumes or a private image, unless it says otherwise', () => {
    const bare = { volumes: 0, usesSecrets: false, privateImage: false };
    expect(needsVerifiedMachine(bare)).toBe(false);
    expect(needsVerifiedMachine({ ...bare, volumes: 1 })).toBe(true);
    expect(needsVerifiedMachine({ ...bare, usesSecrets: true })).toBe(true);
    expect(needsVerifiedMachine({ ...bare, privateImage: true })).toBe(true);
    expect(needsVerifiedMachine({ ...bare, volumes: 2, privateImage: true, verified: false })).toBe(false);
    expect(needsVerifiedMachine({ ...bare, verified: true })).toBe(true);
  });

  it('gives a quarantined machine nothing, even what asks for no more', () => {
    expect(place(request, [machine('m-q', 'quarantined')])).toEqual({
      reason: 'every ready machine in pool p is quarantined (tern machine show says why)',
    });
    expect(place(request, [machine('m-q', 'quarantined'), machine('m-u')])).toEqual({ machineId: 'm-u', gpuIndexes: [] });
  });

  it('gives an unverified machine only what asks for no more', () => {
    expect(place(request, [machine('m-u', 'unverified')])).toEqual({ machineId: 'm-u', gpuIndexes: [] });
    expect(place({ ...request, verified: true }, [machine('m-u', 'unverified'), machine('m-x')])).toEqual({
      reason: expect.stringMatching(/^no verified machine in pool p: 2 ready machine\(s\) have not proven their hardware yet/),
    });
  });

  it('places what asks for verified machines on a verified one, and anything else there too', () => {
    const machines = [machine('m-u'), machine('m-v', 'verified'), machine('m-q', 'quarantined')];
    expect(place({ ...request, verified: true }, machines)).toEqual({ machineId: 'm-v', gpuIndexes: [] });
    expect(place(request, [machine('m-v', 'verified')])).toEqual({ machineId: 'm-v', gpuIndexes: [] });
  });
});
