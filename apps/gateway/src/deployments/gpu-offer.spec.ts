import { resolveSpec, type DeploymentSpec } from '#tern/contracts';
import { gpuOfferProblem, type MachineOffer, type PoolOffer } from './gpu-offer.js';

const code = `sha256:${'a'.repeat(64)}`;
const spec = (extra: Partial<DeploymentSpec>) =>
  resolveSpec({ name: 'x', kind: 'endpoint', handler: 'app.py:f', code, ...extra } as DeploymentSpec);

const pools: PoolOffer[] = [
  { name: 'default', allowedGpuTypes: [] },
  { name: 'h100', allowedGpuTypes: ['H100'] },
];
const machines: MachineOffer[] = [
  { pool: 'default', gpuModels: ['NVIDIA A100-SXM4-80GB', 'NVIDIA A100-SXM4-80GB'] },
  { pool: 'h100', gpuModels: [] },
];

describe('gpuOfferProblem', () => {
  it('accepts CPU-only specs and names an unknown pool', () => {
    expect(gpuOfferProblem(spec({}), false, pools, machines)).toBeNull();
    expect(gpuOfferProblem(spec({ pool: 'nowhere' }), true, pools, machines)).toEqual({
      field: 'pool',
      message: 'pool "nowhere" does not exist (pools: default, h100)',
    });
  });

  it('counts a type a pool lists, or a machine in an admitting pool has', () => {
    expect(gpuOfferProblem(spec({ gpu: 'H100' }), false, pools, machines)).toBeNull();
    expect(gpuOfferProblem(spec({ gpu: 'A100' }), false, pools, machines)).toBeNull();
    expect(gpuOfferProblem(spec({ gpu: 'any' }), false, pools, machines)).toBeNull();
    expect(gpuOfferProblem(spec({ gpu: ['B200', 'A100'] }), false, pools, machines)).toBeNull();
    expect(gpuOfferProblem(spec({ gpu: 'A100', pool: 'h100' }), true, pools, machines)?.message).toBe(
      'no pool offers gpu A100 in pool "h100": pools list H100, machines have no GPUs',
    );
    expect(gpuOfferProblem(spec({ gpu: 'A10' }), false, pools, machines)?.field).toBe('gpu');
  });

  it('refuses more GPUs than any one machine has, but not before any machine has the type', () => {
    expect(gpuOfferProblem(spec({ gpu: 'A100', gpu_count: 4 }), false, pools, machines)).toEqual({
      field: 'gpu_count',
      message: 'gpu_count 4 is more than any machine has: the most on one machine is 2',
    });
    expect(gpuOfferProblem(spec({ gpu: 'A100', gpu_count: 2 }), false, pools, machines)).toBeNull();
    expect(gpuOfferProblem(spec({ gpu: 'H100', gpu_count: 8 }), false, pools, machines)).toBeNull();
  });
});
