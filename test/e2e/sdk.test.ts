import { execFile } from 'node:child_process';
import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TernClient, TernInvalidRequestError, TernNotFoundError, TernRemoteError } from '#tern/client';
import { packFolder } from '../../apps/cli/src/commands/deploy-bundle.js';
import { EXAMPLES } from '../support/examples.js';
import { PYTHON_SDK } from '../support/python-sdk.js';
import { describeNeeding } from '../support/real-parts.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
let example: string;

/** Runs Python with the SDK on its path against the stack; its stdout, or the failure with stderr. */
async function python(args: string[], cwd = example): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)('python3', args, {
    cwd,
    env: { ...process.env, PYTHONPATH: PYTHON_SDK, TERN_GATEWAY: stack.gateway, TERN_TOKEN: stack.token, PYTHONDONTWRITEBYTECODE: '1' },
    maxBuffer: 16 * 2 ** 20,
  });
}

/** What the SDK issue's Python checks print, one JSON line per check. */
const CHECKS = `
import json, sys
import tern
from app import count, predict, square

def out(key, value):
    print(json.dumps({key: value}), flush=True)

out("remote", predict.remote(text="hello from python"))
out("function_remote", square.remote(n=12))
out("scalar_remote", square.remote(7))
out("scalar_map", [r["square"] for r in square.map(range(500), chunk_size=25)])
task = count.put(text="banana")
out("put", {"id": task.id, "result": task.get(timeout=120)})
call = square.spawn(n=3)
out("spawn", {"id": call.id, "result": call.get(timeout=120)})

progress = []
results = list(square.map(({"n": n} for n in range(1000)), chunk_size=50, on_progress=lambda d, t: progress.append((d, t))))
out("map", {"results": results, "progress_first": progress[0], "progress_last": progress[-1], "progress_calls": len(progress)})
kept = list(square.map([{"n": 1}, {"n": "x"}, {"n": 3}], return_exceptions=True))
out("map_exceptions", [r if not isinstance(r, tern.RemoteError) else {"error": type(r).__name__, "message": str(r)} for r in kept])

with tern.Sandbox.create(cpu=0.25, memory="256Mi") as sb:
    ran = sb.run_code("import os; print(6 * 7); print(os.getcwd())")
    sb.files.write("notes/hello.txt", "written from python")
    out("sandbox", {"exit_code": ran.exit_code, "stdout": ran.stdout, "file": sb.files.read("notes/hello.txt").decode(),
                    "listed": [e["name"] for e in sb.files.list("notes")]})
    # A host sandbox's snapshot needs Tern's base in the registry, which this stack's lacks: 409 saying so.
    try:
        sb.snapshot(name="env")
    except tern.ConflictError as e:
        out("snapshot_host", {"status": e.status, "message": e.message})
out("sandbox_after", sb.state)

def error_of(fn):
    try:
        fn()
    except tern.ApiError as e:
        return {"type": type(e).__name__, "status": e.status, "message": e.message}
out("unknown_deployment", error_of(lambda: tern.lookup("no-such-deployment")))
out("unknown_remote", error_of(lambda: tern.Deployment(None, "function", "no-such-fn", {}).remote(n=1)))
out("invalid_field", error_of(lambda: tern.Sandbox.create(cpu=-1)))
`;

/** A class deployment: state loaded once per container by an async @tern.enter, a workspace secret in its environment. */
const CLASSES = `
import asyncio, os
import tern

made = []

@tern.function(name="sdk-greeter", cpu=0.25, memory="128Mi", keep_warm_seconds=30, secrets=[tern.Secret("SDK_GREETING")],
               task_policy={"max_retries": 0, "timeout": 60})
class Greeter:
    def __init__(self):
        made.append(os.getpid())
        self.entered = 0

    @tern.enter
    async def load(self):
        await asyncio.sleep(0.1)
        self.entered += 1
        self.greeting = os.environ["SDK_GREETING"]

    @tern.method
    def greet(self, payload):
        return {"text": f"{self.greeting}, {payload['name']}", "entered": self.entered, "made": len(made), "instance": id(self)}
`;

const CLASS_CHECKS = `
import json
from classes import Greeter
print(json.dumps({"remote": Greeter.remote(name="Ada"), "map": list(Greeter.map([{"name": n} for n in "xyz"]))}))
`;

function checks(stdout: string): Record<string, any> {
  return Object.assign(
    {},
    ...stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as object),
  ) as Record<string, any>;
}

(await describeNeeding(['root', 'runc', 'python3', 'ip', 'nft']))('SDKs end to end', () => {
  beforeAll(async () => {
    stack = await startStack('sdk');
    example = stack.scratch('python-sdk');
    cpSync(join(EXAMPLES, 'python-sdk'), example, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('deploys examples/python-sdk with tern deploy app.py (every decorated handler, one upload), the decorators being the specs', async () => {
    const deployed = await stack.tern('deploy', join(example, 'app.py'));
    expect(deployed).toMatchObject({ code: 0 });
    expect(deployed.stdout.match(/^Deployed sdk-(predict|count|square) version 1: /gm)).toHaveLength(3);
    // One handler alone, by name: a new version of that one only.
    const one = await stack.tern('deploy', join(example, 'app.py:square'));
    expect(one.stdout).toMatch(/^Deployed sdk-square version 2: /m);
    const client = new TernClient({ gateway: stack.gateway, token: stack.token });
    const square = await client.deployment('sdk-square');
    expect(square).toMatchObject({ name: 'sdk-square', kind: 'function' });
    expect(square.spec).toMatchObject({ handler: 'app.py:square', cpuMillicores: 250, workers: 2, keepWarmSeconds: 10 });
    // An option the gateway refuses comes back as its message, naming the field.
    writeFileSync(
      join(example, 'bad.py'),
      'import tern\n\n@tern.function(name="sdk-bad", cpu=-1)\ndef bad(payload):\n    return payload\n',
    );
    const refused = await stack.tern('deploy', join(example, 'bad.py:bad'));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^tern: 400 .*cpu/m);
    writeFileSync(join(example, 'plain.py'), 'def handle(payload):\n    return payload\n');
    const none = await stack.tern('deploy', join(example, 'plain.py'));
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('plain.py declares no handler with @tern.endpoint, @tern.task_queue or @tern.function');
    const undeclared = await stack.tern('deploy', join(example, 'app.py:SMALL'));
    expect(undeclared.stderr).toContain('SMALL is not declared with @tern.endpoint, @tern.task_queue or @tern.function');
  }, 120_000);

  it('deploys a class: its @tern.enter runs once per container, its method serves .remote() and .map(), a tern.Secret reaches it', async () => {
    expect(await stack.tern('secret', 'set', 'SDK_GREETING', 'hello')).toMatchObject({ code: 0 });
    writeFileSync(join(example, 'classes.py'), CLASSES);
    const deployed = await stack.tern('deploy', join(example, 'classes.py'));
    expect(deployed).toMatchObject({ code: 0 });
    expect(deployed.stdout).toMatch(/^Deployed sdk-greeter version 1: /m);
    const client = new TernClient({ gateway: stack.gateway, token: stack.token });
    expect((await client.deployment('sdk-greeter')).spec).toMatchObject({ handler: 'classes.py:Greeter.greet' });
    const got = JSON.parse((await python(['-c', CLASS_CHECKS])).stdout) as Record<string, any>;
    expect(got.remote).toMatchObject({ text: 'hello, Ada', entered: 1, made: 1 });
    expect(got.map.map((r: { text: string }) => r.text)).toEqual(['hello, x', 'hello, y', 'hello, z']);
    // One container (max_containers 1), one instance for all four calls, entered once.
    expect(new Set([got.remote, ...got.map].map((r: { instance: number }) => r.instance)).size).toBe(1);
    for (const r of got.map) expect(r).toMatchObject({ entered: 1, made: 1 });
  }, 300_000);

  it('calls them from Python: .remote(), .put() and its result, .spawn(), .map() over 1,000 inputs in order, a sandbox, typed errors', async () => {
    const { stdout } = await python(['-c', CHECKS]);
    const got = checks(stdout);
    expect(got.remote).toEqual({ text: 'hello from python', words: 3 });
    expect(got.function_remote).toEqual({ n: 12, square: 144 });
    // Any JSON value is an input, as a Modal user passes it.
    expect(got.scalar_remote).toEqual({ n: 7, square: 49 });
    expect(got.scalar_map).toEqual(Array.from({ length: 500 }, (_, i) => i * i));
    expect(got.put.result).toEqual({ letters: { b: 1, a: 3, n: 2 } });
    expect(got.spawn.result).toEqual({ n: 3, square: 9 });
    // Each input once, in input order.
    expect(got.map.results).toHaveLength(1000);
    (got.map.results as { n: number; square: number }[]).forEach((r, i) => expect(r).toEqual({ n: i, square: i * i }));
    expect(got.map).toMatchObject({ progress_first: [1, 1000], progress_last: [1000, 1000], progress_calls: 1000 });
    expect(got.map_exceptions).toEqual([
      { n: 1, square: 1 },
      { error: 'RemoteError', message: expect.stringMatching(/^input 1 error: .*ValueError: "n" must be a number/) },
      { n: 3, square: 9 },
    ]);
    expect(got.sandbox).toMatchObject({ exit_code: 0, file: 'written from python', listed: ['hello.txt'] });
    expect(got.sandbox.stdout).toMatch(/^42\n\/workspace\n$/);
    expect(got.sandbox_after).toBe('terminated');
    expect(got.snapshot_host).toMatchObject({ status: 409, message: expect.stringMatching(/Tern's base image|no image registry/) });
    expect(got.unknown_deployment).toMatchObject({
      type: 'NotFoundError',
      status: 404,
      message: expect.stringContaining('no-such-deployment'),
    });
    expect(got.unknown_remote).toMatchObject({ type: 'NotFoundError', status: 404, message: expect.stringContaining('no-such-fn') });
    expect(got.invalid_field).toMatchObject({ type: 'InvalidRequestError', status: 400, message: expect.stringContaining('cpu') });
  }, 400_000);

  it("runs the example's own script", async () => {
    const { stdout } = await python(['main.py']);
    expect(stdout).toContain("predict.remote: {'text': 'hello from the python sdk', 'words': 5}");
    expect(stdout).toContain("square.map: 1000 results, the last {'n': 999, 'square': 998001}");
    expect(stdout).toMatch(/sandbox.run_code: 0 42/);
    expect(stdout).toContain('lookup of a missing deployment: NotFoundError');
  }, 300_000);

  it('does the same from TypeScript with @tern/client: deploy, invoke, run, put/wait, map, a sandbox, typed errors', async () => {
    const client = new TernClient({ gateway: stack.gateway, token: stack.token });
    const bundle = await packFolder(example);
    if (!(await client.hasCode(bundle.digest))) await client.uploadCode(bundle.digest, bundle.bytes);
    const deployed = await client.deploy({ name: 'ts-square', kind: 'function', handler: 'app.py:square', code: bundle.digest, cpu: 0.25 });
    expect(deployed).toMatchObject({ name: 'ts-square', version: 1 });

    expect(await client.invoke('sdk-predict', { text: 'from typescript' })).toEqual({ text: 'from typescript', words: 2 });
    expect(await client.run('ts-square', { n: 4 })).toEqual({ n: 4, square: 16 });
    const task = await client.put('sdk-count', { text: 'aab' });
    expect(await client.wait(task.task_id, 120)).toMatchObject({ status: 'COMPLETE', result: { letters: { a: 2, b: 1 } } });
    const call = await client.spawn('ts-square', { n: 'x' }, { max_retries: 0 });
    await expect(client.calls.run('ts-square', { n: 'x' }, { max_retries: 0 })).rejects.toThrow(TernRemoteError);
    expect((await client.calls.wait(call.call_id, 120)).status).toBe('ERROR');

    const seen: number[] = [];
    const results: unknown[] = [];
    const inputs = (function* () {
      for (let n = 0; n < 200; n++) yield { n };
    })();
    for await (const r of client.map('ts-square', inputs, { chunk_size: 20, onProgress: (done) => seen.push(done) })) results.push(r);
    expect(results).toEqual(Array.from({ length: 200 }, (_, n) => ({ n, square: n * n })));
    expect(seen).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));

    const sandbox = await client.sandbox({ cpu: 0.25, memory: '256Mi' });
    try {
      expect(await sandbox.runCode('console.log(6 * 7)', 'node')).toMatchObject({ exit_code: 0, stdout: '42\n' });
      await sandbox.files.write('a/b.txt', 'from ts');
      expect(new TextDecoder().decode(await sandbox.files.read('a/b.txt'))).toBe('from ts');
      expect(await sandbox.exec(['sh', '-c', 'cat a/b.txt; exit 3'])).toMatchObject({ exit_code: 3, stdout: 'from ts' });
      await expect(sandbox.snapshot({ name: 'env' })).rejects.toMatchObject({
        message: expect.stringMatching(/^409 .*(Tern's base image|no image registry)/),
      });
    } finally {
      expect(await sandbox.terminate()).toMatchObject({ state: 'terminated' });
    }

    const missing = await client.invoke('no-such-endpoint').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(TernNotFoundError);
    expect((missing as Error).message).toMatch(/^404 .*no-such-endpoint/);
    const invalid = await client.deploy({ name: 'ts-bad', kind: 'function', handler: 'app.py:square', cpu: -1 }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(TernInvalidRequestError);
    expect((invalid as TernInvalidRequestError).status).toBe(400);
    expect((invalid as Error).message).toMatch(/cpu/);
  }, 300_000);
});
