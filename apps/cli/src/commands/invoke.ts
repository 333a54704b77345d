import { Command } from 'commander';
import { TernClient } from '#tern/client';
import { jsonArgument, versionArgument } from '../arguments.js';
import { resolveContext } from '../cli-config.js';

export function invokeCommand(): Command {
  return new Command('invoke')
    .description('Call an endpoint: POST /endpoint/<name>[@<N>][<path>] with a JSON body; prints the response body')
    .argument('<name>', 'the deployment')
    .option('--version <n>', 'a specific version instead of the latest', versionArgument)
    .option('-d, --data <json>', 'the JSON body', jsonArgument, '{}')
    .option('--path <path>', 'a path after the endpoint, e.g. /generate', '')
    .option('--timeout <seconds>', 'give up after this long', (v) => Number(v), 300)
    .action(async (name: string, opts: { version?: number; data: string; path: string; timeout: number }) => {
      const client = new TernClient(resolveContext());
      const response = await client.endpoint(name, new TextEncoder().encode(opts.data), {
        version: opts.version,
        path: opts.path,
        timeoutMs: opts.timeout * 1000,
        contentType: 'application/json',
      });
      const text = await response.text();
      process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    });
}
