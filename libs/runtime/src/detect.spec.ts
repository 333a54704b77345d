import { ContainerRuntimeError } from './errors.js';
import { detectRuntime } from './detect.js';
import type { ImageStore } from './images/image-store.js';

// `true --version` exits 0: a stand-in for an installed binary.
const base = { stateDir: '/nonexistent/tern', images: {} as ImageStore };

describe('detectRuntime', () => {
  it('uses runc unless nerdctl is asked for and installed', async () => {
    expect((await detectRuntime({ ...base, runc: 'true', nerdctl: 'true' })).kind).toBe('runc');
    expect((await detectRuntime({ ...base, prefer: 'nerdctl', runc: 'true', nerdctl: 'true' })).kind).toBe('nerdctl');
    expect((await detectRuntime({ ...base, prefer: 'nerdctl', runc: 'true', nerdctl: '/nonexistent/nerdctl' })).kind).toBe('runc');
  });

  it('falls back to nerdctl without runc, and fails with neither', async () => {
    expect((await detectRuntime({ ...base, runc: '/nonexistent/runc', nerdctl: 'true' })).kind).toBe('nerdctl');
    await expect(detectRuntime({ ...base, runc: '/nonexistent/runc', nerdctl: '/nonexistent/nerdctl' })).rejects.toThrow(
      ContainerRuntimeError,
    );
  });
});
