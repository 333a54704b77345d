import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXAMPLES, exampleSpec } from '../support/examples.js';
import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';

interface Call {
  call_id: string;
  function: string;
  status: string;
  done: boolean;
  result?: { n: number; square: number };
  error: string | null;
}

const fn = (name: string, replace: Record<string, string> = {}) => exampleSpec(stack, 'map-chunks', name, replace);

/** The functions issue's "done when" for one call, as a newcomer does it after `npm run up`. */
let stack: Stack;

describe('functions end to end', () => {
  const auth = () => ({ authorization: `Bearer ${stack.token}` });
  const call = (name: string, input: unknown, query = '') =>
    fetch(`${stack.gateway}/function/${name}${query}`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: typeof input === 'string' ? input : JSON.stringify(input),
    });
  const actual = (name: string) => stack.actual(name);
  const message = async (res: Response) => String(((await res.json()) as { message: string | string[] }).message);

  beforeAll(async () => {
    stack = await startStack('functions');
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('answers one call with its result from a function scaled to zero, then by id after a 202', async () => {
    const deployed = await stack.tern('deploy', fn('squarer', { keep_warm_seconds: '2' }));
    expect(deployed.code).toBe(0);
    expect(deployed.stdout).toContain('/function/squarer');
    expect(await actual('squarer')).toBe(0);

    // From zero: the call starts a container and still answers within its wait.
    const ran = await stack.tern('run', 'squarer', '-d', '{"n": 12}');
    expect(ran).toMatchObject({ code: 0 });
    expect(JSON.parse(ran.stdout)).toEqual({ n: 12, square: 144 });

    const direct = await call('squarer', { n: 5 }, '?wait=120');
    expect(direct.status).toBe(200);
    const answered = (await direct.json()) as Call;
    expect(answered).toMatchObject({ function: 'squarer', status: 'COMPLETE', done: true, result: { n: 5, square: 25 } });

    // wait=0: 202 at once, read later by id.
    const detached = await call('squarer', { n: 9, seconds: 1 }, '?wait=0');
    expect(detached.status).toBe(202);
    const pending = (await detached.json()) as Call;
    expect(pending.done).toBe(false);
    const later = (await (
      await fetch(`${stack.gateway}/api/v1/calls/${pending.call_id}/wait?timeout=120`, { headers: auth() })
    ).json()) as Call;
    expect(later).toMatchObject({ call_id: pending.call_id, status: 'COMPLETE', result: { square: 81 } });
    const read = (await (await fetch(`${stack.gateway}/api/v1/calls/${pending.call_id}`, { headers: auth() })).json()) as Call;
    expect(read).toMatchObject({ status: 'COMPLETE', result: { square: 81 } });

    const detachedCli = await stack.tern('run', 'squarer', '-d', '{"n": 3}', '--detach');
    expect(detachedCli.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);

    // A failing input: the call ends in ERROR after its retries, and tern run says why.
    const failed = await stack.tern('run', 'squarer', '-d', '{"n": "x"}');
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/ERROR: .*"n" must be a number/);

    await waitFor('squarer back to zero', async () => (await actual('squarer')) === 0, 90_000, 500);
  }, 300_000);

  it('answers bad input with a 4xx that says what to fix', async () => {
    expect((await stack.tern('deploy', fn('checked'))).code).toBe(0);
    const notJson = await call('checked', 'this is not json');
    expect(notJson.status).toBe(400);
    expect(await message(notJson)).toMatch(/must be JSON/);
    const unknown = await call('nope', {});
    expect(unknown.status).toBe(404);
    expect(await message(unknown)).toMatch(/function "nope" not found: deploy it with kind: function/);
    const tooLong = await call('checked', {}, '?wait=301');
    expect(tooLong.status).toBe(400);
    expect(await message(tooLong)).toMatch(/wait must be at most 300 seconds/);
    const badVersion = await call('checked', {}, '/latest');
    expect(badVersion.status).toBe(404);
    const malformed = await fetch(`${stack.gateway}/api/v1/calls/not-a-call`, { headers: auth() });
    expect(malformed.status).toBe(400);
    expect(await message(malformed)).toMatch(/not a call id/);
    // A schedule the scheduler could not fire is refused at deploy.
    const scheduled = (schedule: string) => {
      const path = fn('badly-scheduled');
      writeFileSync(path, `${readFileSync(path, 'utf8')}\nschedule:\n${schedule}\n`);
      return stack.tern('deploy', path);
    };
    const badCron = await scheduled('  cron: "every tuesday"');
    expect(badCron.code).not.toBe(0);
    expect(badCron.stderr).toMatch(/400 .*schedule\.cron "every tuesday" is not a cron expression/);
    const badZone = await scheduled('  cron: "0 9 * * *"\n  timezone: Mars/Olympus');
    expect(badZone.stderr).toMatch(/schedule\.timezone "Mars\/Olympus" is not an IANA timezone/);
    // A function is not an endpoint, and an endpoint's URL says where to call it.
    const asEndpoint = await fetch(`${stack.gateway}/endpoint/checked`, { method: 'POST', headers: auth(), body: '{}' });
    expect(asEndpoint.status).toBe(400);
    expect(await message(asEndpoint)).toMatch(/call it at \/function\/checked/);
  }, 120_000);

  it('runs a scheduled function on its ticks, lists it, and pauses it while stopped', async () => {
    const dir = stack.scratch('nightly');
    cpSync(join(EXAMPLES, 'nightly'), dir, { recursive: true });
    const spec = readFileSync(join(dir, 'tern.yaml'), 'utf8')
      .replace(/^ {2}cron:.*$/m, '  every: 2s')
      .replace(/^ {2}timezone:.*$/m, '')
      .replace(/^name:.*$/m, 'name: ticker');
    writeFileSync(join(dir, 'tern.yaml'), spec);
    expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);
    const runs = async () =>
      (
        (await (await fetch(`${stack.gateway}/api/v1/tasks?deployment=ticker&limit=500`, { headers: auth() })).json()) as {
          tasks: { status: string; task_id: string }[];
        }
      ).tasks;
    await waitFor('two runs complete', async () => (await runs()).filter((t) => t.status === 'COMPLETE').length >= 2, 120_000, 500);
    const done = (await runs()).find((t) => t.status === 'COMPLETE')!;
    const read = (await (await fetch(`${stack.gateway}/api/v1/calls/${done.task_id}`, { headers: auth() })).json()) as Call & {
      result: { report: string };
    };
    expect(read.result.report).toBe('nightly');
    const listed = await stack.tern('schedule', 'list');
    expect(listed.stdout).toMatch(/ticker v1\s+every 2s\s+UTC\s+active\s+\d{4}-/);

    expect((await stack.tern('deployment', 'stop', 'ticker')).code).toBe(0);
    await new Promise((r) => setTimeout(r, 1_500)); // a tick claimed as the stop landed
    const stoppedAt = (await runs()).length;
    await new Promise((r) => setTimeout(r, 5_000));
    expect((await runs()).length).toBe(stoppedAt);
    expect((await stack.tern('schedule', 'list')).stdout).toMatch(/ticker v1\s+every 2s\s+UTC\s+paused/);
  }, 240_000);
});
