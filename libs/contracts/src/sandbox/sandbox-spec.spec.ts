import { execArgs } from './sandbox-spec.js';

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
