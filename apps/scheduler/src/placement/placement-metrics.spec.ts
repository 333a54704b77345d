import { place } from '#tern/placement';
import { placementFailureKind } from './placement-metrics.js';

describe('placement failure kinds', () => {
  it('names the binding constraint of the reasons libs/placement gives', () => {
    const request = { pool: 'gpu', gpuCount: 1, gpuTypes: ['A100'], cpuMillicores: 1000, memoryBytes: 2 ** 30 };
    const noMachine = place(request as never, []);
    expect('reason' in noMachine && placementFailureKind(noMachine.reason)).toBe('no_ready_machine');
    expect(placementFailureKind('no ready machine in pool gpu with gpu A100')).toBe('no_matching_gpu');
    expect(placementFailureKind('no machine in pool p has the minimum reputation 0.9: the best is 0.5 (m-1)')).toBe('reputation');
    expect(placementFailureKind('not enough free GPUs: needs a GPU, the most free is 0 (m-1)')).toBe('gpus');
    expect(placementFailureKind('not enough free CPU: needs 1 core, the most free is 0 cores (m-1)')).toBe('cpu');
    expect(placementFailureKind('not enough free memory: needs 1 GiB, the most free is 0 B (m-1)')).toBe('memory');
    expect(placementFailureKind('something new')).toBe('other');
  });
});
