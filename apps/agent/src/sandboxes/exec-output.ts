import { type FileHandle, open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { EXEC_FILES, EXEC_OUTPUT_CHUNK_BYTES } from '#tern/runtime';

const READ_BYTES = 64 * 1024;

/**
 * One stream of a supervised exec, read from its chunk files (`stdout.000000`, …) where the last
 * read stopped. A chunk removed before it was read (the reader fell more than a chunk behind, or
 * started after the process had written more than two) is skipped: reading goes on at the oldest
 * chunk still there.
 */
export class ExecOutputReader {
  private index = 0;
  private offset = 0;
  private handle?: FileHandle;
  private decoder = new StringDecoder('utf8');
  private readonly buffer = Buffer.alloc(READ_BYTES);

  constructor(
    private readonly dir: string,
    readonly stream: 'stdout' | 'stderr',
  ) {}

  /**
   * The next piece of what was written since the last read (at most READ_BYTES, decoded: a
   * character cut by the read waits for its rest); undefined when nothing more is there yet.
   */
  async read(): Promise<string | undefined> {
    for (;;) {
      if (!this.handle) {
        this.handle = await open(join(this.dir, EXEC_FILES.chunk(this.stream, this.index)), 'r').catch(() => undefined);
        this.offset = 0;
        if (!this.handle) {
          const later = await this.oldestChunkAfter(this.index);
          if (later === undefined) return undefined;
          this.index = later;
          this.decoder = new StringDecoder('utf8');
          continue;
        }
      }
      const { bytesRead } = await this.handle.read(this.buffer, 0, READ_BYTES, this.offset);
      if (bytesRead) {
        this.offset += bytesRead;
        return this.decoder.write(this.buffer.subarray(0, bytesRead));
      }
      // A chunk short of its size is the one being written: more may come.
      if (this.offset < EXEC_OUTPUT_CHUNK_BYTES) return undefined;
      await this.handle.close();
      this.handle = undefined;
      this.index++;
    }
  }

  /** What a character cut at the very end left (nothing more will come), and the file closed. */
  async end(): Promise<string> {
    await this.handle?.close();
    this.handle = undefined;
    return this.decoder.end();
  }

  private async oldestChunkAfter(index: number): Promise<number | undefined> {
    const prefix = `${this.stream}.`;
    const found = (await readdir(this.dir).catch(() => [] as string[]))
      .filter((f) => f.startsWith(prefix))
      .map((f) => Number(f.slice(prefix.length)))
      .filter((n) => Number.isInteger(n) && n > index);
    return found.length ? Math.min(...found) : undefined;
  }
}
