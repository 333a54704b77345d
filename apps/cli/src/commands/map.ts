import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { Command, InvalidArgumentError } from 'commander';
import type { MapResultLine, MapStarted, MapView } from '#tern/contracts';
import { countArgument, versionArgument } from '../arguments.js';
import { ApiClient, ApiError } from '../api-client.js';
import { type CliContext, resolveContext } from '../cli-config.js';

const RECONNECT_MS = 1_000;
const REDRAW_MS = 250;

/** done/total, rate, ETA and failures, as one line. */
export function progressLine(done: number, total: number, failures: number, elapsedSeconds: number, width = 24): string {
  const share = total ? done / total : 1;
  const filled = Math.round(share * width);
  const rate = elapsedSeconds > 0 ? done / elapsedSeconds : 0;
  const eta = rate > 0 && done < total ? `${Math.ceil((total - done) / rate)}s` : done >= total ? '0s' : '?';
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} ${(share * 100).toFixed(0)}% ${rate.toFixed(0)}/s ETA ${eta} failures ${failures}`;
}

function headers(ctx: CliContext): Record<string, string> {
  return ctx.token ? { authorization: `Bearer ${ctx.token}` } : {};
}

/** Streams the inputs file up (never whole in memory); answers once the gateway accepted every input. */
async function startMap(ctx: CliContext, path: string, input: string): Promise<MapStarted> {
  const source = input === '-' ? process.stdin : createReadStream(input);
  const response = await fetch(`${ctx.gateway}${path}`, {
    method: 'POST',
    headers: { ...headers(ctx), 'content-type': 'application/x-ndjson' },
    body: Readable.toWeb(source) as ReadableStream<Uint8Array>,
    duplex: 'half',
  } as RequestInit & { duplex: 'half' }).catch((e: Error) => {
    throw new ApiError(0, `cannot reach the gateway at ${ctx.gateway} (${String(e.cause ?? e.message)}); is it running? (npm run up)`);
  });
  const body = (await response.json().catch(() => ({}))) as MapStarted & { message?: string | string[] };
  if (response.status !== 202) {
    const message = Array.isArray(body.message) ? body.message.join('; ') : (body.message ?? response.statusText);
    throw new ApiError(response.status, `${response.status} ${message}`);
  }
  return body;
}

/**
 * Follows /results to the last line, reconnecting with from=<lines so far> when the connection
 * drops, so each line is written once; `onLine` sees every line.
 */
export async function followResults(ctx: CliContext, mapId: string, total: number, onLine: (text: string, line: MapResultLine) => void) {
  let received = 0;
  while (received < total) {
    try {
      const response = await fetch(`${ctx.gateway}/api/v1/maps/${mapId}/results?from=${received}`, { headers: headers(ctx) });
      if (!response.ok) throw new ApiError(response.status, `${response.status} ${await response.text()}`);
      let partial = '';
      for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
        const lines = (partial + Buffer.from(bytes).toString('utf8')).split('\n');
        partial = lines.pop()!;
        for (const text of lines) {
          if (!text) continue;
          onLine(text, JSON.parse(text) as MapResultLine);
          received++;
        }
      }
    } catch (e) {
      if (e instanceof ApiError && e.status >= 400 && e.status < 500) throw e;
    }
    if (received < total) await new Promise((r) => setTimeout(r, RECONNECT_MS));
  }
}

export function mapCommand(): Command {
  return new Command('map')
    .description('Map a function over many inputs server-side: POST /function/<name>/map, then the results as NDJSON in input order')
    .argument('<function>', 'the function deployment')
    .requiredOption('--input <file>', 'the inputs: NDJSON (one JSON object per line) or a JSON array; - for stdin')
    .option('--chunk-size <n>', 'inputs per task (the handler is called once per input in the container)', countArgument, 1)
    .option('--out <file>', 'write the result lines here (default: stdout)')
    .option('--return-exceptions', "keep a failed input's error in its place instead of failing the map")
    .option('--order <order>', 'input (default) or completion', (v: string) => {
      if (v !== 'input' && v !== 'completion') throw new InvalidArgumentError('must be input or completion');
      return v;
    })
    .option('--version <n>', 'a specific version of the function', versionArgument)
    .option('--detach', 'print the map id once every input is accepted, and do not follow the results')
    .action(
      async (
        name: string,
        o: {
          input: string;
          chunkSize: number;
          out?: string;
          returnExceptions?: boolean;
          order?: string;
          version?: number;
          detach?: boolean;
        },
      ) => {
        const ctx = resolveContext();
        const query = new URLSearchParams({ chunk_size: String(o.chunkSize) });
        if (o.returnExceptions) query.set('return_exceptions', 'true');
        if (o.order) query.set('order', o.order);
        const started = await startMap(
          ctx,
          `/function/${encodeURIComponent(name)}${o.version ? `/v${o.version}` : ''}/map?${query}`,
          o.input,
        );
        process.stderr.write(`map ${started.map_id}: ${started.total} input(s) in ${started.chunks} chunk(s) of ${started.chunk_size}\n`);
        if (o.detach) {
          process.stdout.write(`${started.map_id}\n`);
          return;
        }
        const out: WriteStream | NodeJS.WriteStream = o.out ? createWriteStream(o.out) : process.stdout;
        const since = Date.now();
        let done = 0;
        let failures = 0;
        const live = process.stderr.isTTY;
        const draw = () => {
          const line = progressLine(done, started.total, failures, (Date.now() - since) / 1000);
          process.stderr.write(live ? `\r${line}` : `${line}\n`);
        };
        const redraw = setInterval(draw, live ? REDRAW_MS : 5_000);
        try {
          await followResults(ctx, started.map_id, started.total, (text, line) => {
            out.write(`${text}\n`);
            done++;
            if (line.status !== 'ok') failures++;
          });
        } finally {
          clearInterval(redraw);
          draw();
          if (live) process.stderr.write('\n');
          if (o.out) await new Promise((r) => (out as WriteStream).end(r));
        }
        const map = (await new ApiClient(ctx).get<MapView>(`/api/v1/maps/${started.map_id}`)).body;
        process.stderr.write(
          `map ${map.map_id} ${map.status}: ${map.counts.succeeded} succeeded, ${map.counts.failed} failed, ${map.counts.cancelled} cancelled${map.error ? ` (${map.error})` : ''}\n`,
        );
        if (map.status !== 'complete') process.exitCode = 1;
      },
    );
}
