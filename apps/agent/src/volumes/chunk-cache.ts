import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { sha256Hex } from '#tern/volumes';

/**
 * Volume chunks on this machine, one file per chunk named by its sha256 (`<dir>/<hex>`), kept
 * up to `maxBytes` and evicted least recently used first. A chunk is verified against its name
 * before it is kept, so a cached one is never wrong and a second mount downloads nothing.
 */
export class ChunkCache {
  private readonly lru: LRUCache<string, number>;
  private readonly inFlight = new Map<string, Promise<string>>();
  private loaded?: Promise<void>;

  constructor(
    readonly dir: string,
    maxBytes: number,
  ) {
    this.lru = new LRUCache<string, number>({
      maxSize: maxBytes,
      sizeCalculation: (size) => Math.max(1, size),
      dispose: (_size, hex, reason) => {
        if (reason === 'evict' || reason === 'delete') void rm(join(this.dir, hex), { force: true }).catch(() => undefined);
      },
    });
  }

  /** Chunks kept by an earlier run, oldest use first (by access time). */
  private load(): Promise<void> {
    this.loaded ??= (async () => {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      const found: { hex: string; size: number; used: number }[] = [];
      for (const name of await readdir(this.dir)) {
        if (!/^[a-f0-9]{64}$/.test(name)) {
          await rm(join(this.dir, name), { force: true, recursive: true });
          continue;
        }
        const s = await stat(join(this.dir, name));
        found.push({ hex: name, size: s.size, used: s.atimeMs });
      }
      for (const f of found.sort((a, b) => a.used - b.used)) this.lru.set(f.hex, f.size);
    })();
    return this.loaded;
  }

  /** The path of the chunk's file, fetched with `download` when this machine does not hold it. */
  async ensure(hex: string, download: () => Promise<Uint8Array>): Promise<string> {
    await this.load();
    if (this.lru.get(hex) !== undefined) return join(this.dir, hex);
    let p = this.inFlight.get(hex);
    if (!p) {
      p = this.fetch(hex, download).finally(() => this.inFlight.delete(hex));
      this.inFlight.set(hex, p);
    }
    return p;
  }

  has(hex: string): boolean {
    return this.lru.has(hex);
  }

  /** Bytes held. */
  get size(): number {
    return this.lru.calculatedSize;
  }

  private async fetch(hex: string, download: () => Promise<Uint8Array>): Promise<string> {
    const data = await download();
    const actual = sha256Hex(data);
    if (actual !== hex) throw new Error(`volume chunk ${hex} from the gateway hashes to ${actual}; refusing it`);
    // Written beside, then renamed: a crash leaves no half chunk under a good name.
    const tmp = join(this.dir, `.tmp-${hex}-${randomBytes(4).toString('hex')}`);
    await writeFile(tmp, data, { mode: 0o600 });
    await rename(tmp, join(this.dir, hex));
    this.lru.set(hex, data.length);
    return join(this.dir, hex);
  }
}
