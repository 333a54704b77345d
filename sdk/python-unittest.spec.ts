import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const SDK = fileURLToPath(new URL('./python', import.meta.url));

/** The Python SDK's own unit tests, run by Python's runner, so that `npm test` counts them. */
describe('Python SDK (python3 -m unittest)', () => {
  it('passes its unit tests', async () => {
    const ran = await promisify(execFile)('python3', ['-m', 'unittest', 'discover', '-s', 'tests', '-t', '.', '-v'], {
      cwd: SDK,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    }).catch((e: { code: number; stdout: string; stderr: string }) => e);
    // unittest reports on stderr; a failure's report is the assertion message.
    expect(ran.stderr).toMatch(/\nOK\s*$/);
    expect(ran.stderr).toMatch(/Ran (\d+) tests/);
    expect(Number(/Ran (\d+) tests/.exec(ran.stderr)?.[1])).toBeGreaterThanOrEqual(16);
  }, 120_000);
});
