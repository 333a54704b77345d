import { Command } from 'commander';
import { type Input, TernClient, WAIT_PER_REQUEST } from '#tern/client';
import { jsonArgument, secondsArgument, versionArgument } from '../arguments.js';
import { resolveContext } from '../cli-config.js';

export function runCommand(): Command {
  return new Command('run')
    .description('Call a function once: POST /function/<name>[/v<N>]; prints its result as JSON (or the call id with --detach)')
    .argument('<function>', 'the function deployment')
    .option('-d, --data <json>', "the input (any JSON value: the handler's argument)", jsonArgument, '{}')
    .option('--version <n>', 'a specific version of the function', versionArgument)
    .option('--detach', 'print the call id at once and do not wait (read it later: GET /api/v1/calls/<id>)')
    .option('--timeout <seconds>', 'stop waiting after this long and print the call id', secondsArgument, 3600)
    .action(async (name: string, o: { data: string; version?: number; detach?: boolean; timeout: number }) => {
      const { calls } = new TernClient(resolveContext());
      const body = await calls.spawn(name, JSON.parse(o.data) as Input, {
        version: o.version,
        waitSeconds: o.detach ? 0 : WAIT_PER_REQUEST,
      });
      if (o.detach) {
        process.stdout.write(`${body.call_id}\n`);
        return;
      }
      const call = await calls.wait(body.call_id, o.timeout, body);
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
