import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * sha256 off the event loop without copying the bytes: a buffer over a SharedArrayBuffer
 * (`sharedBuffer`) is hashed by a worker thread reading the same memory. `crypto.subtle.digest`
 * first copies its input on the event loop (into fresh memory: a 4 MiB chunk's copy cost about
 * as much main-thread time as receiving it); other buffers still go that way. The caller leaves
 * the bytes unchanged until the digest is answered.
 */
export async function sha256Of(bytes: Uint8Array): Promise<string> {
  if (!(bytes.buffer instanceof SharedArrayBuffer)) return Buffer.from(await crypto.subtle.digest('SHA-256', bytes)).toString('hex');
  return hasher().hash(bytes);
}

/**
 * One sha256 taken piece by piece on a worker thread, for bytes that pass through reused shared
 * buffers (a site cache's download): each `update` resolves once the thread has read the piece,
 * after which its buffer may be reused; `digest` ends it. Pieces go to one thread, in order.
 */
export interface Sha256Stream {
  update(bytes: Uint8Array): Promise<void>;
  digest(): Promise<string>;
  /** Drops a hash that will not be finished (its pieces posted so far are still read, and answered). */
  discard(): void;
}

/** An incremental sha256 on the threads `sha256Of` uses; pieces must be views of shared memory (`sharedBuffer`). */
export function sha256Stream(): Sha256Stream {
  return hasher().stream();
}

/** A buffer of `size` bytes over shared memory: `sha256Of` hashes it without a copy. */
export function sharedBuffer(size: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(size));
}

/** The worker's code (CommonJS, evaluated: it runs from the build and from the tests' sources alike). */
const WORKER = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const streams = new Map();
parentPort.on('message', ({ id, stream, memory, offset, length, end }) => {
  if (stream === undefined) {
    return parentPort.postMessage({ id, hex: createHash('sha256').update(new Uint8Array(memory, offset, length)).digest('hex') });
  }
  let hash = streams.get(stream);
  if (!hash) streams.set(stream, (hash = createHash('sha256')));
  if (memory) hash.update(new Uint8Array(memory, offset, length));
  if (!end) return parentPort.postMessage({ id, hex: '' });
  streams.delete(stream);
  parentPort.postMessage({ id, hex: hash.digest('hex') });
});
`;

/** A worker thread: its digests waiting, its streams not yet ended, and why it stopped (once it has). */
type Thread = { worker: Worker; waiting: Map<number, (result: string | Error) => void>; streams: number; gone?: Error };

/** A few worker threads, each taking the next digest when it has the fewest waiting. */
class Hasher {
  private readonly threads: Thread[] = [];
  private next = 0;

  constructor(private readonly count: number) {}

  hash(bytes: Uint8Array): Promise<string> {
    return this.post(this.thread(), { memory: bytes.buffer, offset: bytes.byteOffset, length: bytes.byteLength });
  }

  stream(): Sha256Stream {
    // One thread for all of its pieces: a thread answers its messages in order.
    const thread = this.thread();
    thread.streams++;
    const stream = this.next++;
    let ended = false;
    const end = () => {
      if (!ended) thread.streams--;
      ended = true;
      return this.post(thread, { stream, end: true });
    };
    const piece = (bytes: Uint8Array) => {
      if (!(bytes.buffer instanceof SharedArrayBuffer)) throw new Error('a sha256 stream hashes views of shared memory only');
      return { stream, memory: bytes.buffer, offset: bytes.byteOffset, length: bytes.byteLength };
    };
    return {
      update: async (bytes) => void (await this.post(thread, piece(bytes))),
      digest: end,
      discard: () => void end().catch(() => undefined),
    };
  }

  private post(thread: Thread, message: object): Promise<string> {
    if (thread.gone) return Promise.reject(thread.gone);
    const id = this.next++;
    return new Promise<string>((resolve, reject) => {
      thread.waiting.set(id, (result) => (result instanceof Error ? reject(result) : resolve(result)));
      if (thread.waiting.size === 1) thread.worker.ref();
      thread.worker.postMessage({ id, ...message });
    });
  }

  /** The thread with the least work (digests waiting, streams open), a new one while there are fewer than `count` and all are busy. */
  private thread(): Thread {
    const load = (t: Thread) => t.waiting.size + t.streams;
    if (this.threads.length < this.count && this.threads.every((t) => load(t) > 0)) this.threads.push(this.start());
    return this.threads.reduce((a, b) => (load(b) < load(a) ? b : a));
  }

  private start(): Thread {
    const worker = new Worker(WORKER, { eval: true });
    const thread: Thread = { worker, waiting: new Map<number, (result: string | Error) => void>(), streams: 0 };
    // Idle threads do not keep the process alive.
    worker.unref();
    worker.on('message', ({ id, hex }: { id: number; hex: string }) => {
      thread.waiting.get(id)?.(hex);
      thread.waiting.delete(id);
      if (thread.waiting.size === 0) worker.unref();
    });
    const gone = (error: Error) => {
      const at = this.threads.indexOf(thread);
      if (at >= 0) this.threads.splice(at, 1);
      // A stream's later pieces would be posted to a thread that no longer answers: they fail at once.
      thread.gone ??= new Error(`the sha256 thread stopped: ${error.message}`);
      for (const settle of thread.waiting.values()) settle(thread.gone);
      thread.waiting.clear();
    };
    worker.on('error', gone);
    worker.on('exit', (code) => gone(new Error(`exit ${code}`)));
    return thread;
  }
}

let shared: Hasher | undefined;

function hasher(): Hasher {
  // Two threads keep up with a 2-core machine's network; more cores, more threads (the event loop keeps one).
  shared ??= new Hasher(Math.max(2, Math.min(4, availableParallelism() - 1)));
  return shared;
}
