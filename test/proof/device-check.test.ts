import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describeNeeding } from '../support/real-parts.js';

const describeWithRunc = await describeNeeding(['root', 'runc', 'python3']);
const ROOT = join(import.meta.dirname, '../..');
const run = promisify(execFile);

// The device check (scripts/device-check) as it will run on a lent GPU machine, here with a fake
// GPU: the bundle builds, and its whole path (discovery's inventory, the runtime's container with
// the device nodes, the Python prover, the verifier) runs and refuses a GPU computed on a CPU.
describeWithRunc('the device check, on a machine without a GPU', () => {
  it('builds one bundle and refuses a fake H100 answered from the CPU, and a claim of 8', async () => {
    await run('node', ['scripts/device-check/build.mjs'], { cwd: ROOT });
    const { stdout } = await run('sh', ['scripts/device-check/run.sh', '--fake-gpu'], { cwd: ROOT, env: { ...process.env, OUT: '' } });
    const summary = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      ok: boolean;
      fake: boolean;
      honest: { verdict: string; reason: string }[];
      larger: { verified: boolean; rounds: { device: string; verdict: string }[] };
    };
    expect(summary).toMatchObject({ ok: true, fake: true });
    expect(summary.honest).toEqual([
      expect.objectContaining({
        verdict: 'failed',
        reason: expect.stringMatching(/^GPU 0 \(NVIDIA H100 80GB HBM3\) did not commit to a 8192×8192 int8 product within 8.22 s/),
      }),
    ]);
    expect(summary.larger.verified).toBe(false);
    expect(summary.larger.rounds.map((r) => r.verdict)).toEqual(['failed', ...Array<string>(7).fill('declined')]);
  }, 240_000);
});
