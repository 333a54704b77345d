import { type FileHandle, open } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LogLine, LogStream } from '../types.js';

export interface TailSource {
  stream: LogStream;
  path: string;
}

export interface TailOptions {
  /** Keep reading until isFinished() says the writer is done (default true). */
  follow?: boolean;
  signal?: AbortSignal;
  /** True once nothing more will be written; the files are then drained and the tail ends. */
  isFinished: () => Promise<boolean>;
  pollMs?: number;
  /** A longer line is cut into pieces of this many characters, so one runaway line cannot exhaust memory. */
  maxLineChars?: number;
}

interface SourceState extends TailSource {
  handle?: FileHandle;
  position: number;
  decoder: StringDecoder;
  partial: string;
}

const CHUNK = 64 * 1024;

/**
 * Lines appended to a container's stdout and stderr files, as they arrive. Polls (a stat and
 * a read per file per tick): cheap, and unlike inotify it also works on network filesystems.
 */
export async function* tailLogs(containerId: string, sources: TailSource[], options: TailOptions): AsyncGenerator<LogLine> {
  const follow = options.follow ?? true;
  const pollMs = options.pollMs ?? 50;
  const maxLine = options.maxLineChars ?? 64 * 1024;
  const states: SourceState[] = sources.map((s) => ({ ...s, position: 0, decoder: new StringDecoder('utf8'), partial: '' }));
  const buffer = Buffer.alloc(CHUNK);
  let finishing = false;

  const readNew = async (s: SourceState): Promise<LogLine[]> => {
    s.handle ??= await open(s.path, 'r').catch(() => undefined);
    if (!s.handle) return [];
    const lines: LogLine[] = [];
    for (;;) {
      const { bytesRead } = await s.handle.read(buffer, 0, CHUNK, s.position);
      if (!bytesRead) break;
      s.position += bytesRead;
      s.partial += s.decoder.write(buffer.subarray(0, bytesRead));
      const parts = s.partial.split('\n');
      s.partial = parts.pop() ?? '';
      const time = new Date();
      for (const whole of parts) {
        let line = whole.replace(/\r$/, '');
        for (; line.length > maxLine; line = line.slice(maxLine))
          lines.push({ containerId, stream: s.stream, line: line.slice(0, maxLine), time });
        lines.push({ containerId, stream: s.stream, line, time });
      }
      while (s.partial.length > maxLine) {
        lines.push({ containerId, stream: s.stream, line: s.partial.slice(0, maxLine), time });
        s.partial = s.partial.slice(maxLine);
      }
    }
    return lines;
  };

  try {
    for (;;) {
      let any = false;
      for (const s of states) {
        for (const line of await readNew(s)) {
          any = true;
          yield line;
        }
      }
      if (any) continue;
      if (!follow || finishing) break;
      if (await options.isFinished()) {
        // One more pass: whatever was written before the writer finished.
        finishing = true;
        continue;
      }
      try {
        await sleep(pollMs, undefined, { signal: options.signal });
      } catch {
        return;
      }
    }
    for (const s of states) {
      const rest = s.partial + s.decoder.end();
      if (rest) yield { containerId, stream: s.stream, line: rest, time: new Date() };
    }
  } finally {
    await Promise.all(states.map((s) => s.handle?.close().catch(() => undefined)));
  }
}
