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

/** A buffer of `size` bytes over shared memory: `sha256Of` hashes it without a copy. */
export function sharedBuffer(size: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(size));
}

/**
 * An incremental sha256 on one of the threads: pieces of shared memory, hashed in the order given.
 * Each `update` settles once its bytes are read (the caller may then reuse them); `digest` ends it.
 */
export interface Sha256Stream {
  update(bytes: Uint8Array): Promise<void>;
  digest(): Promise<string>;
}

/** A sha256 of bytes that come piece by piece (a layer as it downloads), off the event loop. */
export function sha256Stream(): Sha256Stream {
  return hasher().stream();
}

/**
 * The worker's code (CommonJS, evaluated: it runs from the build and from the tests' sources
 * alike). A message with a `stream` is a piece of an incremental hash (`length` absent: its end).
 */
const WORKER = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const streams = new Map();
parentPort.on('message', ({ id, stream, memory, offset, length }) => {
  if (stream === undefined) {
    parentPort.postMessage({ id, hex: createHash('sha256').update(new Uint8Array(memory, offset, length)).digest('hex') });
    return;
  }
  let hash = streams.get(stream);
  if (!hash) streams.set(stream, (hash = createHash('sha256')));
  if (length === undefined) {
    streams.delete(stream);
    parentPort.postMessage({ id, hex: hash.digest('hex') });
  } else {
    hash.update(new Uint8Array(memory, offset, length));
    parentPort.postMessage({ id, hex: '' });
  }
});
`;

/** A thread, the answers it owes, and how many streams it holds open. */
type Thread = { worker: Worker; waiting: Map<number, (result: string | Error) => void>; streams: number };

/** A few worker threads, each taking the next digest when it has the fewest waiting. */
class Hasher {
  private readonly threads: Thread[] = [];
  private next = 0;
  private streams = 0;

  constructor(private readonly count: number) {}

  hash(bytes: Uint8Array): Promise<string> {
    return this.ask(this.thread(), { memory: bytes.buffer, offset: bytes.byteOffset, length: bytes.byteLength });
  }

  /**
   * A stream stays on the thread it started on (one thread's messages are handled in order), the
   * one holding the fewest streams; its end (`digest`) frees the thread's state for it.
   */
  stream(): Sha256Stream {
    if (this.threads.length < this.count && this.threads.every((t) => t.streams > 0)) this.threads.push(this.start());
    const thread = this.threads.reduce((a, b) => (b.streams < a.streams ? b : a));
    thread.streams++;
    const stream = this.streams++;
    let ended = false;
    return {
      update: async (bytes) => {
        if (!(bytes.buffer instanceof SharedArrayBuffer)) throw new TypeError('sha256Stream hashes shared memory only (sharedBuffer)');
        await this.ask(thread, { stream, memory: bytes.buffer, offset: bytes.byteOffset, length: bytes.byteLength });
      },
      digest: () => {
        if (!ended) thread.streams--;
        ended = true;
        return this.ask(thread, { stream });
      },
    };
  }

  private ask(thread: Thread, message: { stream?: number; memory?: ArrayBufferLike; offset?: number; length?: number }): Promise<string> {
    if (!this.threads.includes(thread)) return Promise.reject(new Error('the sha256 thread stopped'));
    const id = this.next++;
    return new Promise<string>((resolve, reject) => {
      thread.waiting.set(id, (result) => (result instanceof Error ? reject(result) : resolve(result)));
      if (thread.waiting.size === 1) thread.worker.ref();
      thread.worker.postMessage({ id, ...message });
    });
  }

  private thread(): Thread {
    if (this.threads.length < this.count && this.threads.every((t) => t.waiting.size > 0)) this.threads.push(this.start());
    return this.threads.reduce((a, b) => (b.waiting.size < a.waiting.size ? b : a));
  }

  private start(): Thread {
    const worker = new Worker(WORKER, { eval: true });
    const thread: Thread = { worker, waiting: new Map(), streams: 0 };
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
      for (const settle of thread.waiting.values()) settle(new Error(`the sha256 thread stopped: ${error.message}`));
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
