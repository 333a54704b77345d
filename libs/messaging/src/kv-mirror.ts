import type { KV, KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/transport-node';
import { sleep } from '#tern/timing';

export interface KvMirrorLogger {
  warn(message: string): unknown;
}

export interface KvMirrorOptions<T> {
  /** Named in log lines. */
  bucket: string;
  /** Opens the bucket; called again after the watch fails (NATS away, bucket deleted). */
  open: () => Promise<KV>;
  logger: KvMirrorLogger;
  /**
   * Turns a stored value into the mirrored one; `undefined` leaves the key out (as if deleted),
   * a throw is logged and the entry ignored (the previous value stays).
   */
  decode?: (key: string, entry: KvWatchEntry) => T | undefined;
  /** After every change of a key: `value` undefined when it went away, `old` what it replaced. */
  onChange?: (key: string, value: T | undefined, old: T | undefined) => void;
  /** Wait before reopening a failed watch (2 s). */
  reopenAfterMs?: number;
}

/**
 * The one KV mirror of the codebase: follows a bucket into a map, live. A watch delivers the
 * current values first and every change after, so start-up and updates are one code path;
 * `ready()` resolves after the first load. A watch that fails is reopened after a pause; a key
 * that went away meanwhile with no marker left (the bucket made again, a TTL that expired the
 * marker too) is dropped once the reopened watch has delivered the bucket.
 */
export class KvMirror<T> {
  private readonly entries = new Map<string, T>();
  private watch?: QueuedIterator<KvWatchEntry>;
  private following?: Promise<void>;
  private readonly abort = new AbortController();
  private loaded = false;
  private markLoaded!: () => void;
  private readonly firstLoad = new Promise<void>((resolve) => (this.markLoaded = resolve));

  constructor(private readonly options: KvMirrorOptions<T>) {}

  start(): this {
    this.following ??= this.follow();
    return this;
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.watch?.stop();
    await this.following;
  }

  /** Whether the bucket's values at start have all arrived. */
  get isLoaded(): boolean {
    return this.loaded;
  }

  /** Resolves true after the first load, or false once timeoutMs has passed without one. */
  async ready(timeoutMs?: number): Promise<boolean> {
    if (this.loaded) return true;
    if (timeoutMs === undefined) {
      await this.firstLoad;
      return true;
    }
    const timeout = new AbortController();
    await Promise.race([this.firstLoad, sleep(timeoutMs, timeout.signal)]);
    timeout.abort();
    return this.loaded;
  }

  get(key: string): T | undefined {
    return this.entries.get(key);
  }

  get size(): number {
    return this.entries.size;
  }

  values(): IterableIterator<T> {
    return this.entries.values();
  }

  /** The mirrored entries, read-only. */
  map(): ReadonlyMap<string, T> {
    return this.entries;
  }

  private async follow(): Promise<void> {
    const { bucket, logger } = this.options;
    while (!this.abort.signal.aborted) {
      try {
        await this.watchOnce();
      } catch (error) {
        if (!this.abort.signal.aborted) logger.warn(`watch of KV ${bucket} ended: ${(error as Error).message}; reopening`);
      }
      if (!this.abort.signal.aborted) await sleep(this.options.reopenAfterMs ?? 2000, this.abort.signal);
    }
  }

  private async watchOnce(): Promise<void> {
    const kv = await this.options.open();
    const status = await kv.status();
    if (this.abort.signal.aborted) return;
    this.watch = await kv.watch();
    // Keys delivered by this watch's first load: the others went away while no watch was open.
    let seen: Set<string> | undefined = new Set();
    const loadedNow = () => {
      if (!seen) return;
      for (const key of [...this.entries.keys()]) if (!seen.has(key)) this.set(key, undefined);
      seen = undefined;
      this.loaded = true;
      this.markLoaded();
    };
    if (status.values === 0) loadedNow();
    for await (const entry of this.watch) {
      seen?.add(entry.key);
      this.apply(entry);
      if (entry.delta === 0 || entry.isUpdate) loadedNow();
    }
  }

  private apply(entry: KvWatchEntry): void {
    if (entry.operation !== 'PUT') return this.set(entry.key, undefined);
    let value: T | undefined;
    try {
      value = this.options.decode ? this.options.decode(entry.key, entry) : entry.json<T>();
    } catch (error) {
      this.options.logger.warn(`ignored unreadable ${this.options.bucket} entry ${entry.key}: ${(error as Error).message}`);
      return;
    }
    this.set(entry.key, value);
  }

  private set(key: string, value: T | undefined): void {
    const old = this.entries.get(key);
    if (value === undefined) {
      if (!this.entries.delete(key)) return;
    } else this.entries.set(key, value);
    this.options.onChange?.(key, value, old);
  }
}
