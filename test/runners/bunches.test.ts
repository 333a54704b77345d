import { BunchCall } from '../../dist/apps/agent/src/tasks/bunch-call.js';
import { callHandler } from '../../dist/apps/agent/src/tasks/call-handler.js';
import { RunnerProcess, type RunnerLanguage } from './runner-process.js';

/** A handler that echoes, fails or sleeps per input, in both languages. */
const APPS: Record<RunnerLanguage, { files: Record<string, string>; handler: string }> = {
  python: {
    files: {
      'app.py': `
import os, time
def predict(p):
    if p.get("fail"):
        raise ValueError("bad input: " + p["fail"])
    if p.get("sleep"):
        time.sleep(p["sleep"])
    if p.get("items"):
        return (i for i in range(p["items"]))
    return {"echo": p, "pid": os.getpid()}
`,
    },
    handler: 'app.py:predict',
  },
  node: {
    files: {
      'app.mjs': `
const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));
export async function predict(p) {
  if (p.fail) throw new RangeError('bad input: ' + p.fail);
  if (p.sleep) await sleep(p.sleep);
  if (p.items) return (function* () { for (let i = 0; i < p.items; i++) yield i; })();
  return { echo: p, pid: process.pid };
}
`,
    },
    handler: 'app.mjs:predict',
  },
};

const id = (n: number) => `00000000-0000-4000-8000-00000000000${n}`;
const chunk = (inputs: unknown[], returnExceptions = false) => ({ __tern_map_chunk__: { inputs, return_exceptions: returnExceptions } });
const member = (n: number, inputs: unknown[]) => ({ taskId: id(n), attempt: 1, payload: chunk(inputs) });
const plain = (n: number, payload: unknown) => ({ taskId: id(n), attempt: 1, payload });
const resultOf = (o: unknown) => JSON.parse((o as { json: Buffer }).json.toString()) as unknown;

describe.each(['python', 'node'] as const)('%s runner: a bunch of map chunks in one call', (language) => {
  let runner: RunnerProcess | undefined;
  const start = async (kind = 'function') => {
    runner = await new RunnerProcess(language, APPS[language].files).start({
      TERN_HANDLER: APPS[language].handler,
      TERN_DEPLOYMENT_KIND: kind,
    });
    await runner.waitForHealth(200);
    return { host: '127.0.0.1', port: runner.port };
  };

  afterEach(async () => {
    await runner?.stop();
    runner = undefined;
  });

  it("says it takes bunches, runs each member in turn and answers each as it ends; a member's failure is its own", async () => {
    const endpoint = await start();
    let takes = 'none';
    const alone = await callHandler(endpoint, id(9), 1, chunk([{ x: 0 }]), new AbortController().signal, (b: string) => (takes = b));
    expect(alone.kind).toBe('ok');
    expect(takes).toBe('plain');

    const call = new BunchCall(endpoint, [member(1, [{ x: 1 }, { x: 2 }]), member(2, [{ fail: 'two' }]), member(3, [{ x: 3 }])]);
    const outcomes = [];
    for (let i = 0; i < 3; i++) {
      expect(await call.turn(i)).toBe(true);
      outcomes.push(await call.outcome(i));
    }
    const [first, second, third] = outcomes;
    expect(first.kind).toBe('ok');
    const results = JSON.parse((first as { json: Buffer }).json.toString()) as { status: string; result: { echo: unknown } }[];
    expect(results.map((r) => r.result.echo)).toEqual([{ x: 1 }, { x: 2 }]);
    // The failed member's error is what its own call would have said (type, traceback, types for no_retry_on).
    expect(second).toMatchObject({ kind: 'error', status: 500 });
    expect((second as { message: string }).message).toContain(
      `input 0 of the chunk: ${language === 'python' ? 'ValueError' : 'RangeError'}`,
    );
    expect((second as { types: string[] }).types).toEqual(expect.arrayContaining(['MapInputError']));
    expect(third.kind).toBe('ok');
    expect(JSON.parse((third as { json: Buffer }).json.toString())).toMatchObject([{ status: 'ok', result: { echo: { x: 3 } } }]);
  });

  it("a member's hang-up (its timeout) ends the worker: it is aborted, those after it never begin, the next call is served", async () => {
    const endpoint = await start();
    const call = new BunchCall(endpoint, [member(1, [{ x: 1 }]), member(2, [{ sleep: 30 }]), member(3, [{ x: 3 }])]);
    expect(await call.turn(0)).toBe(true);
    expect((await call.outcome(0)).kind).toBe('ok');
    expect(await call.turn(1)).toBe(true);
    // Member 0 has ended: hanging up for it changes nothing.
    call.hangUp(0);
    call.hangUp(1);
    expect(await call.outcome(1)).toEqual({ kind: 'aborted' });
    expect(await call.turn(2)).toBe(false);
    await runner!.waitForOutput('stderr', /hung up \(cancelled or timed out\); ending worker/, 5000);
    // A fresh worker serves the member that never began, alone, once the runner answers again (as the agent waits).
    await runner!.waitForHealth(200);
    const again = await callHandler(endpoint, id(3), 1, chunk([{ x: 3 }]), new AbortController().signal);
    expect(again.kind).toBe('ok');
  });

  it('begins no member once the call has run its budget (a bunch sized by a mean that no longer holds): the rest never begin', async () => {
    const endpoint = await start();
    const call = new BunchCall(endpoint, [member(1, [{ sleep: 0.4 }]), member(2, [{ x: 2 }]), member(3, [{ x: 3 }])]);
    expect(await call.turn(0)).toBe(true);
    expect((await call.outcome(0)).kind).toBe('ok');
    expect(await call.turn(1)).toBe(false);
    expect(await call.turn(2)).toBe(false);
  });

  it('plain tasks in a bunch, beside a map chunk: each answered as its own call, a failure its own, a stream as its items', async () => {
    const endpoint = await start('task_queue');
    const call = new BunchCall(endpoint, [
      plain(1, { x: 1 }),
      plain(2, { fail: 'two' }),
      member(3, [{ x: 3 }]),
      plain(4, { items: 3 }),
      plain(5, 'a string payload'),
    ]);
    const outcomes = [];
    for (let i = 0; i < 5; i++) {
      expect(await call.turn(i)).toBe(true);
      outcomes.push(await call.outcome(i));
    }
    const [first, second, third, fourth, fifth] = outcomes;
    expect(resultOf(first)).toMatchObject({ echo: { x: 1 } });
    expect(second).toMatchObject({ kind: 'error', status: 500 });
    expect((second as { message: string }).message).toContain(`${language === 'python' ? 'ValueError' : 'RangeError'}: bad input: two`);
    expect((second as { types: string[] }).types).toContain(language === 'python' ? 'ValueError' : 'RangeError');
    expect(resultOf(third)).toMatchObject([{ status: 'ok', result: { echo: { x: 3 } } }]);
    expect(resultOf(fourth)).toEqual([0, 1, 2]);
    // Not an object: the handler gets it as it came, and it ends as its own call ends.
    const fifthAlone = await callHandler(endpoint, id(6), 1, 'a string payload', new AbortController().signal);
    expect(fifth.kind).toBe(fifthAlone.kind);
    if (fifth.kind === 'ok') expect(resultOf(fifth)).toEqual(resultOf(fifthAlone));
  });

  it('a runner that does not take bunches (no task call: an endpoint, or an older runner) runs none of them', async () => {
    const endpoint = await start('endpoint');
    let takes = 'none';
    expect((await callHandler(endpoint, id(9), 1, chunk([{ x: 0 }]), new AbortController().signal, (b: string) => (takes = b))).kind).toBe(
      'ok',
    );
    expect(takes).toBe('none');
    const call = new BunchCall(endpoint, [member(1, [{ x: 1 }]), member(2, [{ x: 2 }])]);
    expect(await call.turn(0)).toBe(false);
    expect(await call.turn(1)).toBe(false);
  });
});
