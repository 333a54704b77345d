import { InvalidContainerSpecError } from './errors.js';
import type { ContainerSpec } from './types.js';
import { validateSpec } from './validation.js';

const ok: ContainerSpec = { id: 'tt-1', image: 'host', args: ['true'] };

describe('validateSpec', () => {
  it('accepts a minimal spec', () => {
    expect(() => validateSpec(ok)).not.toThrow();
    expect(() => validateSpec({ ...ok, volumes: [{ name: 'ws_1/models', containerPath: '/models' }] })).not.toThrow();
    expect(() => validateSpec({ ...ok, network: 'private', egress: { allow: ['203.0.113.0/24', '198.51.100.7'] } })).not.toThrow();
  });

  it.each<[string, Partial<ContainerSpec>]>([
    ['a bad id', { id: '../x' }],
    ['an id starting with a dash', { id: '-x' }],
    ['a bad env name', { env: { 'A-B': '1' } }],
    ['a relative cwd', { cwd: 'app' }],
    ['too little memory', { memoryBytes: 1024 }],
    ['a fractional CPU', { cpuMillicores: 1.5 }],
    ['a port out of range', { port: 70000 }],
    ['a volume escaping the root', { volumes: [{ name: '../etc', containerPath: '/x' }] }],
    ['a volume over /proc', { volumes: [{ name: 'v', containerPath: '/proc/x' }] }],
    ['a volume over /', { volumes: [{ name: 'v', containerPath: '/' }] }],
    ['a negative GPU index', { gpus: { devices: [{ index: -1 }] } }],
    ['an unknown network', { network: 'bridge' as never }],
    ['an egress policy without a private network', { network: 'host', egress: { block: true } }],
    ['an allow list with a name', { network: 'private', egress: { allow: ['example.com'] } }],
    ['an allow list with host bits set', { network: 'private', egress: { allow: ['10.0.0.1/8'] } }],
    ['an allow list smuggling nft syntax', { network: 'private', egress: { allow: ['1.2.3.4 } accept; {'] } }],
  ])('rejects %s', (_, patch) => {
    expect(() => validateSpec({ ...ok, ...patch })).toThrow(InvalidContainerSpecError);
  });
});
