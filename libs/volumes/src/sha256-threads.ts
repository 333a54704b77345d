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

/** The worker's code (CommonJS, evaluated: it runs from the build and from the tests' sources alike). */
const WORKER = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
parentPort.on('message', ({ id, memory, offset, length }) => {
  parentPort.postMessage({ id, hex: createHash('sha256').update(new Uint8Array(memory, offset, length)).digest('hex') });
});
`;

/** A few worker threads, each taking the next digest when it has the fewest waiting. */
class Hasher {
  private readonly threads: { worker: Worker; waiting: Map<number, (result: string | Error) => void> }[] = [];
  private next = 0;

  constructor(private readonly count: number) {}

  hash(bytes: Uint8Array): Promise<string> {
    const thread = this.thread();
    const id = this.next++;
    return new Promise<string>((resolve, reject) => {
      thread.waiting.set(id, (result) => (result instanceof Error ? reject(result) : resolve(result)));
      if (thread.waiting.size === 1) thread.worker.ref();
      thread.worker.postMessage({ id, memory: bytes.buffer, offset: bytes.byteOffset, length: bytes.byteLength });
    });
  }

  private thread() {
    if (this.threads.length < this.count && this.threads.every((t) => t.waiting.size > 0)) this.threads.push(this.start());
    return this.threads.reduce((a, b) => (b.waiting.size < a.waiting.size ? b : a));
  }

  private start() {
    const worker = new Worker(WORKER, { eval: true });
    const thread = { worker, waiting: new Map<number, (result: string | Error) => void>() };
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
