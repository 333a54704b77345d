import { awaitStart, type StartFiles } from './start-wait.js';

/**
 * A bundle whose container runs and exits at one chosen moment: after `readsBefore` file
 * reads, the pid file and the exit file both appear at once (a program that exits at once).
 */
function exitsAfter(readsBefore: number, opts: { writesPid: boolean; status: string }): StartFiles {
  let reads = 0;
  const done = () => reads++ >= readsBefore;
  return {
    pid: async () => (done() && opts.writesPid ? 4242 : undefined),
    exitStatus: async () => (done() ? opts.status : undefined),
  };
}

describe('awaitStart', () => {
  it('reports a program that ran and exited as started, wherever between two reads it ran', async () => {
    for (let readsBefore = 0; readsBefore < 8; readsBefore++) {
      const outcome = await awaitStart(exitsAfter(readsBefore, { writesPid: true, status: '0' }), 5_000, 0);
      expect({ readsBefore, outcome }).toEqual({ readsBefore, outcome: { started: true, pid: 4242 } });
    }
  });

  it('reports a start runc refused (exit status, no pid) as a failed start with the status', async () => {
    for (let readsBefore = 0; readsBefore < 8; readsBefore++) {
      const outcome = await awaitStart(exitsAfter(readsBefore, { writesPid: false, status: '1' }), 5_000, 0);
      expect(outcome).toEqual({ started: false, reason: 'runc exited with status 1' });
    }
  });

  it('gives up after the timeout when runc neither starts the process nor returns', async () => {
    const never: StartFiles = { pid: async () => undefined, exitStatus: async () => undefined };
    expect(await awaitStart(never, 30, 5)).toEqual({ started: false, reason: 'timed out waiting for runc to start the process' });
  });
});
