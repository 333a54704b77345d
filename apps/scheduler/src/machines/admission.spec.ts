import { gpuTypeMatches } from '#tern/contracts';
import { admit } from './admission.js';

const open = { name: 'default', allowedGpuTypes: [], minNetworkMbps: null };
const h100 = { index: 0, model: 'NVIDIA H100 80GB HBM3' };
const a10g = { index: 1, model: 'NVIDIA A10G' };
const test = (nats: number, http: number, error?: string) => ({
  nats: { throughputMbps: nats },
  http: { throughputMbps: http, ...(error ? { error } : {}) },
});

describe('gpuTypeMatches', () => {
  it.each([
    ['NVIDIA H100 80GB HBM3', 'H100', true],
    ['NVIDIA H100 80GB HBM3', 'h100 80gb', true],
    ['NVIDIA GeForce RTX 4090', 'RTX 4090', true],
    ['NVIDIA A100-SXM4-80GB', 'A100', true],
    ['NVIDIA A100-SXM4-80GB', 'A10', false],
    ['NVIDIA A10G', 'A10', false],
    ['NVIDIA A10G', 'A10G', true],
    ['NVIDIA H100', '', false],
  ])('%s ~ %s: %s', (model, type, expected) => {
    expect(gpuTypeMatches(model, type)).toBe(expected);
  });
});

describe('admit', () => {
  it('admits anything into a pool without rules', () => {
    expect(admit({ gpus: [] }, open)).toEqual({ schedulable: true });
    expect(admit({ gpus: [h100, a10g], networkTest: test(1, 1) }, open)).toEqual({ schedulable: true });
  });

  it('refuses GPUs the pool does not allow, naming the GPU', () => {
    const pool = { ...open, name: 'fast', allowedGpuTypes: ['H100', 'A100'] };
    expect(admit({ gpus: [h100] }, pool)).toEqual({ schedulable: true });
    expect(admit({ gpus: [h100, a10g] }, pool)).toEqual({
      schedulable: false,
      reason: 'GPU 1 (NVIDIA A10G) is not a type pool "fast" allows (H100, A100)',
    });
    expect(admit({ gpus: [] }, pool)).toEqual({ schedulable: false, reason: 'no GPU: pool "fast" admits only machines with H100, A100' });
  });

  it('compares the slower leg of a known network test with the minimum', () => {
    const pool = { ...open, name: 'fast', minNetworkMbps: 100 };
    expect(admit({ gpus: [] }, pool)).toEqual({ schedulable: true });
    expect(admit({ gpus: [], networkTest: test(500, 100) }, pool)).toEqual({ schedulable: true });
    expect(admit({ gpus: [], networkTest: test(500, 42.4) }, pool)).toEqual({
      schedulable: false,
      reason: 'network 42 Mbps (http) is below pool "fast"\'s minimum of 100 Mbps',
    });
    expect(admit({ gpus: [], networkTest: test(20, 900) }, pool)).toMatchObject({ reason: expect.stringContaining('(nats)') });
  });

  it('counts a failed network test as below the minimum, saying why', () => {
    const pool = { ...open, name: 'fast', minNetworkMbps: 100 };
    expect(admit({ gpus: [], networkTest: test(500, 0, 'connection refused') }, pool)).toEqual({
      schedulable: false,
      reason: 'network test over http failed (connection refused); pool "fast" needs 100 Mbps',
    });
  });
});
