import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { Command, InvalidArgumentError } from 'commander';
import { TernClient } from '#tern/client';
import { countArgument, versionArgument } from '../arguments.js';
import { resolveContext } from '../cli-config.js';

const REDRAW_MS = 250;

/** done/total, rate, ETA and failures, as one line. */
export function progressLine(done: number, total: number, failures: number, elapsedSeconds: number, width = 24): string {
  const share = total ? done / total : 1;
  const filled = Math.round(share * width);
  const rate = elapsedSeconds > 0 ? done / elapsedSeconds : 0;
  const eta = rate > 0 && done < total ? `${Math.ceil((total - done) / rate)}s` : done >= total ? '0s' : '?';
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} ${(share * 100).toFixed(0)}% ${rate.toFixed(0)}/s ETA ${eta} failures ${failures}`;
}

export function mapCommand(): Command {
  return new Command('map')
    .description('Map a function over many inputs server-side: POST /function/<name>/map, then the results as NDJSON in input order')
    .argument('<function>', 'the function deployment')
    .requiredOption('--input <file>', 'the inputs: NDJSON (one JSON value per line) or a JSON array; - for stdin')
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
        const { maps } = new TernClient(resolveContext());
        // The inputs file is streamed up as it is read, never whole in memory.
        const source = o.input === '-' ? process.stdin : createReadStream(o.input);
        const started = await maps.start(name, Readable.toWeb(source) as ReadableStream<Uint8Array>, {
          version: o.version,
          chunk_size: o.chunkSize,
          ...(o.returnExceptions ? { return_exceptions: true } : {}),
          ...(o.order ? { order: o.order as 'input' | 'completion' } : {}),
        });
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
          for await (const line of maps.results(started.map_id, started.total)) {
            out.write(`${JSON.stringify(line)}\n`);
            done++;
            if (line.status !== 'ok') failures++;
          }
        } finally {
          clearInterval(redraw);
          draw();
          if (live) process.stderr.write('\n');
          if (o.out) await new Promise((r) => (out as WriteStream).end(r));
        }
        const map = await maps.get(started.map_id);
        process.stderr.write(
          `map ${map.map_id} ${map.status}: ${map.counts.succeeded} succeeded, ${map.counts.failed} failed, ${map.counts.cancelled} cancelled${map.error ? ` (${map.error})` : ''}\n`,
        );
        if (map.status !== 'complete') process.exitCode = 1;
      },
    );
}
