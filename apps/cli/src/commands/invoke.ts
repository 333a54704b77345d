import { Command } from 'commander';
import { jsonArgument, versionArgument } from '../arguments.js';
import { ApiError } from '../api-client.js';
import { resolveContext } from '../cli-config.js';

export function invokeCommand(): Command {
  return new Command('invoke')
    .description('Call an endpoint: POST /endpoint/<name>[/v<N>][<path>] with a JSON body; prints the response body')
    .argument('<name>', 'the deployment')
    .option('--version <n>', 'a specific version instead of the latest', versionArgument)
    .option('-d, --data <json>', 'the JSON body', jsonArgument, '{}')
    .option('--path <path>', 'a path after the endpoint, e.g. /generate', '')
    .option('--timeout <seconds>', 'give up after this long', (v) => Number(v), 300)
    .action(async (name: string, opts: { version?: number; data: string; path: string; timeout: number }) => {
      const ctx = resolveContext();
      const path = opts.path && !opts.path.startsWith('/') ? `/${opts.path}` : opts.path;
      const url = `${ctx.gateway}/endpoint/${encodeURIComponent(name)}${opts.version ? `/v${opts.version}` : ''}${path}`;
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(ctx.token ? { authorization: `Bearer ${ctx.token}` } : {}) },
        body: opts.data,
        signal: AbortSignal.timeout(opts.timeout * 1000),
      }).catch((e: Error) => {
        throw new ApiError(0, `cannot reach the gateway at ${ctx.gateway} (${e.cause ?? e.message}); is it running? (npm run up)`);
      });
      const text = await response.text();
      if (response.status >= 400) {
        let message = text;
        try {
          message = [(JSON.parse(text) as { message?: string | string[] }).message ?? text].flat().join('; ');
        } catch {
          /* not JSON: print it as it is */
        }
        throw new ApiError(response.status, `${response.status} ${message || response.statusText}`);
      }
      process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    });
}
