import 'reflect-metadata';
import { validatePayload } from '#tern/messaging';
import { execArgs, SandboxSpec } from './sandbox-spec.js';

describe('execArgs', () => {
  it('runs a cmd as given', () => {
    expect(execArgs({ cmd: ['ls', '-l'] })).toEqual({ ok: true, args: ['ls', '-l'] });
  });

  it('runs code in its language, Python by default', () => {
    expect(execArgs({ code: 'print(1)' })).toEqual({ ok: true, args: ['python3', '-c', 'print(1)'] });
    expect(execArgs({ code: 'console.log(1)', language: 'node' })).toEqual({ ok: true, args: ['node', '-e', 'console.log(1)'] });
    expect(execArgs({ code: 'echo 1', language: 'bash' })).toEqual({ ok: true, args: ['bash', '-c', 'echo 1'] });
  });

  it('refuses neither and both', () => {
    expect(execArgs({})).toEqual({ ok: false, reason: expect.stringMatching(/cmd .* or code .* is required/) });
    expect(execArgs({ cmd: ['true'], code: 'x' })).toEqual({ ok: false, reason: 'give cmd or code, not both' });
  });
});

describe('SandboxSpec image', () => {
  it.each(['host', 'registry.example.com/team/model:1.2', `127.0.0.1:5000/builds/ws/snapshots/s@sha256:${'a'.repeat(64)}`])(
    'takes %s',
    async (image) => {
      expect((await validatePayload(SandboxSpec, { image })).ok).toBe(true);
    },
  );

  it.each([
    ['oci:/etc', 'cannot name a path on the worker'],
    ['python:3.12', 'names no registry'],
    [{ base: 'tern', pip: ['numpy'] }, 'a sandbox runs a built image, not a build'],
    [42, 'image must be "host" or a registry reference'],
  ])('refuses %j saying why', async (image, reason) => {
    expect(await validatePayload(SandboxSpec, { image })).toMatchObject({ ok: false, reason: expect.stringContaining(reason) });
  });
});
