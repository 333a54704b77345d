import { Command } from 'commander';
import { REMOTE_TRACEBACK, type SubmittedTask, type TaskList, type TaskView } from '#tern/contracts';
import { countArgument, jsonArgument, secondsArgument, versionArgument } from '../arguments.js';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { ago } from '../format.js';
import { table } from '../table.js';

function client() {
  return new ApiClient(resolveContext());
}

function duration(t: TaskView): string {
  if (!t.started_at) return '-';
  const end = t.ended_at ? Date.parse(t.ended_at) : Date.now();
  return `${((end - Date.parse(t.started_at)) / 1000).toFixed(1)}s`;
}

export function renderTasks(tasks: TaskView[]): string {
  if (!tasks.length) return 'No tasks.';
  return table(
    ['TASK', 'QUEUE', 'STATUS', 'ATTEMPTS', 'CREATED', 'RAN', 'ERROR'],
    tasks.map((t) => [
      t.task_id,
      `${t.deployment} v${t.version}`,
      t.status,
      String(t.attempts),
      ago(t.created_at),
      duration(t),
      (t.error ?? '').split('\n')[0].slice(0, 60),
    ]),
  );
}

/** The task as JSON; a remote traceback in its error is printed again after it, as written (JSON would show it on one line). */
function print(t: TaskView) {
  process.stdout.write(`${JSON.stringify(t, null, 2)}\n`);
  const trace = t.error?.split(REMOTE_TRACEBACK)[1];
  if (trace) process.stderr.write(`\nRemote traceback:\n${trace}\n`);
}

/** Waits (long polls) until the task ends or `timeoutSeconds` pass; the last view either way. */
async function waitFor(api: ApiClient, id: string, timeoutSeconds: number): Promise<TaskView> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
    const { body } = await api.get<TaskView>(`/api/v1/tasks/${encodeURIComponent(id)}/wait?timeout=${Math.min(25, left)}`);
    if (body.done || Date.now() >= deadline) return body;
  }
}

export function taskCommand(): Command {
  const cmd = new Command('task').description('Task queues: submit tasks, follow them, cancel them');

  cmd
    .command('put')
    .description('Submit a task: POST /taskqueue/<queue>[/v<N>] with a JSON payload; prints the task id (or the result with --wait)')
    .argument('<queue>', 'the task_queue deployment')
    .option('-d, --data <json>', "the payload (any JSON value: the handler's argument)", jsonArgument, '{}')
    .option('--version <n>', 'a specific version of the queue', versionArgument)
    .option('--max-retries <n>', "override the queue's max_retries", countArgument)
    .option('--timeout <seconds>', "override the queue's task timeout", secondsArgument)
    .option('--ttl <seconds>', 'expire the task if it has not started by then', secondsArgument)
    .option('--callback-url <url>', 'POST the finished task here')
    .option('--wait [seconds]', 'wait for the result (default up to 600 s)')
    .action(
      async (
        queue: string,
        o: {
          data: string;
          version?: number;
          maxRetries?: number;
          timeout?: number;
          ttl?: number;
          callbackUrl?: string;
          wait?: string | boolean;
        },
      ) => {
        const ctx = resolveContext();
        const query = new URLSearchParams();
        if (o.maxRetries !== undefined) query.set('max_retries', String(o.maxRetries));
        if (o.timeout !== undefined) query.set('timeout', String(o.timeout));
        if (o.ttl !== undefined) query.set('ttl', String(o.ttl));
        if (o.callbackUrl) query.set('callback_url', o.callbackUrl);
        const path = `/taskqueue/${encodeURIComponent(queue)}${o.version ? `/v${o.version}` : ''}${query.size ? `?${query}` : ''}`;
        const api = new ApiClient(ctx);
        const { body } = await api.request<SubmittedTask>('POST', path, JSON.parse(o.data));
        if (o.wait === undefined) {
          process.stdout.write(`${body.task_id}\n`);
          return;
        }
        print(await waitFor(api, body.task_id, o.wait === true ? 600 : secondsArgument(String(o.wait))));
      },
    );

  cmd
    .command('get')
    .description('One task: status, attempts, timestamps, result or error')
    .argument('<task-id>')
    .action(async (id: string) => print((await client().get<TaskView>(`/api/v1/tasks/${encodeURIComponent(id)}`)).body));

  cmd
    .command('wait')
    .description('Wait for a task to end and print it (exit code 1 unless it is COMPLETE)')
    .argument('<task-id>')
    .option('--timeout <seconds>', 'give up waiting after this long', secondsArgument, 600)
    .action(async (id: string, o: { timeout: number }) => {
      const t = await waitFor(client(), id, o.timeout);
      print(t);
      if (t.status !== 'COMPLETE') process.exitCode = 1;
    });

  cmd
    .command('list')
    .description('Tasks of the workspace, newest first')
    .option('--queue <name>', 'only this task queue')
    .option('--status <states>', 'only these states, comma-separated (PENDING,RUNNING,...)')
    .option('--limit <n>', 'at most this many', countArgument, 50)
    .action(async (o: { queue?: string; status?: string; limit: number }) => {
      const query = new URLSearchParams({ limit: String(o.limit) });
      if (o.queue) query.set('deployment', o.queue);
      if (o.status) query.set('status', o.status);
      const { body } = await client().get<TaskList>(`/api/v1/tasks?${query}`);
      process.stdout.write(`${renderTasks(body.tasks)}\n`);
    });

  cmd
    .command('cancel')
    .description('Cancel a task: a pending one never runs, a running one is stopped')
    .argument('<task-id>')
    .action(async (id: string) => {
      const { body } = await client().request<TaskView>('DELETE', `/api/v1/tasks/${encodeURIComponent(id)}`);
      process.stdout.write(`${body.task_id} ${body.status}\n`);
    });

  return cmd;
}
