import { Command, InvalidArgumentError } from 'commander';
import type { ContainerLogLine, DeploymentLogsInfo } from '#tern/contracts';
import { ApiClient, ApiError } from '../api-client.js';
import { resolveContext } from '../cli-config.js';

function positive(value: string): number {
  if (!/^[1-9]\d*$/.test(value.trim())) throw new InvalidArgumentError('must be a whole number above 0');
  return Number(value);
}

/** Splits a server-sent event stream into (event, data) pairs. */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<{ event: string; data: string }> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (data.length) yield { event, data: data.join('\n') };
    }
  }
}

export function logsCommand(): Command {
  return new Command('logs')
    .description(
      "Log lines of a deployment's containers as they are written. Past lines are not stored centrally (each agent keeps its containers' log files), so without -f this listens for a few seconds.",
    )
    .argument('<deployment>')
    .option('-f, --follow', 'keep following, including containers that start later')
    .option('--tail <n>', 'stop after n lines', positive)
    .option('--wait <seconds>', 'without -f: how long to listen (default 3)', positive)
    .option('--json', 'one JSON log line per line')
    .action(async (name: string, opts: { follow?: boolean; tail?: number; wait?: number; json?: boolean }) => {
      const ctx = resolveContext();
      const query = new URLSearchParams({ follow: String(Boolean(opts.follow)) });
      if (opts.tail) query.set('tail', String(opts.tail));
      if (opts.wait) query.set('wait', String(opts.wait));
      const response = await new ApiClient(ctx).stream('GET', `/api/v1/deployments/${encodeURIComponent(name)}/logs?${query}`);
      if (!response.body) throw new ApiError(response.status, `${response.status} the gateway sent no log stream`);
      for await (const { event, data } of events(response.body)) {
        if (event === 'info') {
          const info = JSON.parse(data) as DeploymentLogsInfo;
          if (!opts.json)
            process.stderr.write(`Following ${info.containers.length} container(s) of ${name}${opts.follow ? ' (Ctrl-C to stop)' : ''}.\n`);
        } else if (event === 'line') {
          const line = JSON.parse(data) as ContainerLogLine;
          process.stdout.write(
            opts.json ? `${data}\n` : `${line.containerId.slice(0, 12)} ${line.stream === 'stderr' ? '!' : ' '} ${line.line}\n`,
          );
        }
      }
    });
}
