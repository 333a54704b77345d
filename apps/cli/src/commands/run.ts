import { Command } from 'commander';
import type { CallView } from '#tern/contracts';
import { jsonArgument, secondsArgument, versionArgument } from '../arguments.js';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';

/** Seconds one request holds open: under the client's own 30 s request timeout; longer waits poll again. */
const WAIT_PER_REQUEST = 25;

/** Long polls GET /api/v1/calls/<id>/wait until the call ends or `timeoutSeconds` pass. */
export async function waitForCall(api: ApiClient, call: CallView, timeoutSeconds: number): Promise<CallView> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  let view = call;
  while (!view.done && Date.now() < deadline) {
    const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
    view = (await api.get<CallView>(`/api/v1/calls/${encodeURIComponent(view.call_id)}/wait?timeout=${Math.min(WAIT_PER_REQUEST, left)}`))
      .body;
  }
  return view;
}

export function runCommand(): Command {
  return new Command('run')
    .description('Call a function once: POST /function/<name>[/v<N>]; prints its result as JSON (or the call id with --detach)')
    .argument('<function>', 'the function deployment')
    .option('-d, --data <json>', 'the input (a JSON object)', jsonArgument, '{}')
    .option('--version <n>', 'a specific version of the function', versionArgument)
    .option('--detach', 'print the call id at once and do not wait (read it later: GET /api/v1/calls/<id>)')
    .option('--timeout <seconds>', 'stop waiting after this long and print the call id', secondsArgument, 3600)
    .action(async (name: string, o: { data: string; version?: number; detach?: boolean; timeout: number }) => {
      const api = new ApiClient(resolveContext());
      const path = `/function/${encodeURIComponent(name)}${o.version ? `/v${o.version}` : ''}?wait=${o.detach ? 0 : WAIT_PER_REQUEST}`;
      const { body } = await api.request<CallView>('POST', path, JSON.parse(o.data));
      if (o.detach) {
        process.stdout.write(`${body.call_id}\n`);
        return;
      }
      const call = await waitForCall(api, body, o.timeout);
      if (!call.done) {
        process.stderr.write(`call ${call.call_id} is still ${call.status}; follow it with GET /api/v1/calls/${call.call_id}/wait\n`);
        process.stdout.write(`${call.call_id}\n`);
        process.exitCode = 2;
      } else if (call.status === 'COMPLETE') {
        process.stdout.write(`${JSON.stringify(call.result ?? null)}\n`);
      } else {
        process.stderr.write(`call ${call.call_id} ${call.status}: ${call.error ?? 'no error recorded'}\n`);
        process.exitCode = 1;
      }
    });
}
