import { connect, type Socket } from 'node:net';

/**
 * GETs over plain HTTP/1.1 whose body the kernel reads straight into the caller's buffer (a socket
 * with `onread`): no buffer per socket read, no copy of each piece into the chunk, no HTTP parser
 * on the body. node:http gives every read its own 64 KiB buffer, and those buffers alone had the
 * garbage collector run a full collection every few MiB of a mount. For blob GETs only: a
 * response whose body is not sized by Content-Length is read as text and its connection closed.
 */

/** What a GET answered: a 200's body, a redirect's target, or another status and the start of its text. */
export type StraightAnswer = { bytes: Buffer } | { location: string } | { status: number; text: string };

/** The head of a response is read into a buffer of this size (a registry's heads are well under it). */
const HEAD_BYTES = 16 * 1024;
/** Idle kept-alive connections kept per origin. */
const IDLE_PER_ORIGIN = 64;

const idle = new Map<string, Connection[]>();

/**
 * GETs `url` (http: only): a 200's body in one buffer of its Content-Length, the start of `into`
 * when given, refusing a body over `maxBytes` (or over `into`) or one cut short. A connection kept
 * alive that the server closed before answering is replaced once.
 */
export async function getStraight(
  url: URL,
  headers: Record<string, string>,
  maxBytes: number,
  timeoutMs: number,
  into?: Buffer,
): Promise<StraightAnswer> {
  const most = into ? Math.min(maxBytes, into.length) : maxBytes;
  const reused = idle.get(url.origin)?.pop();
  if (reused) {
    const answer = await reused.get(url, headers, most, timeoutMs, into).catch((e: Error) => e);
    if (!(answer instanceof StaleConnection)) return throwing(answer);
  }
  return throwing(await Connection.open(url).get(url, headers, most, timeoutMs, into));
}

/** Where a streamed body goes (`getStreaming`): the buffers the socket reads it into, in order. */
export interface BodySink {
  /** The body's length, from the answer's head, and how to steer its flow. */
  begin(length: number, flow: BodyFlow): void;
  /** Room for the body's next bytes (not empty), or undefined while there is none: the socket then waits for `flow.more`. */
  space(): Buffer | undefined;
  /** The body's next `n` bytes are at the start of what `space` gave last. */
  took(n: number): void;
}

/** A streamed body's flow, for its sink. */
export interface BodyFlow {
  /** `space` has room again after it had none. */
  more(): void;
  /** The sink takes no more: the connection is cut and the GET fails with `reason`. */
  stop(reason: Error): void;
}

/** What a streamed GET answered: a 200 whose body went to the sink whole, a redirect's target, or another status. */
export type StreamAnswer = { length: number } | { location: string } | { status: number; text: string };

/**
 * GETs `url` (http: only) and reads a 200's body, sized by its Content-Length, straight into the
 * buffers `sink` gives, as it arrives: no buffer per socket read and no copy (but for the few
 * bytes that come with the head, or after the sink ran out of room). Resolves once the body went
 * to the sink whole; rejects when it was cut short or stopped.
 */
export async function getStreaming(url: URL, headers: Record<string, string>, timeoutMs: number, sink: BodySink): Promise<StreamAnswer> {
  const reused = idle.get(url.origin)?.pop();
  if (reused) {
    const answer = await reused.stream(url, headers, timeoutMs, sink).catch((e: Error) => e);
    if (!(answer instanceof StaleConnection)) return throwing(answer);
  }
  return throwing(await Connection.open(url).stream(url, headers, timeoutMs, sink));
}

/**
 * Buffers a streamed body's reader lends, one after another, each handed back with the bytes read
 * into it (a layer's pieces: each hashed and written whole). Reading pauses while none is free,
 * until the body's `more()`.
 */
export interface BodyPieces {
  /** A buffer for the next bytes, or undefined while none is free. */
  take(): Buffer | undefined;
  /** The body's next `n` bytes are at the start of `buffer` (one `take` gave). */
  put(buffer: Buffer, n: number): void;
}

/** A 200 whose body is on its way into the pieces. */
export interface StreamedBody {
  /** Its Content-Length. */
  length: number;
  /** Settles once every byte is put, or rejects when the connection is lost before (`cut off after …`). */
  ended: Promise<void>;
  /** A buffer was freed: reading goes on if it had paused. */
  more(): void;
  /** Stops reading: the connection is closed, `ended` rejects. */
  cancel(): void;
}

/** What `getStreamed` answered: a 200's body on its way, a redirect's target, or another status and the start of its text. */
export type StreamedAnswer = { body: StreamedBody } | Exclude<StreamAnswer, { length: number }>;

/**
 * GETs `url` (http: only) as `getStreaming` does, its 200's body read into whole buffers `pieces`
 * lends (each put once full, the last once the body is whole); the answer comes with the head,
 * while the body is still on its way.
 */
export function getStreamed(url: URL, headers: Record<string, string>, timeoutMs: number, pieces: BodyPieces): Promise<StreamedAnswer> {
  return new Promise<StreamedAnswer>((resolve, reject) => {
    let piece: Buffer | undefined;
    let filled = 0;
    let got = 0;
    let length = Infinity;
    const done = getStreaming(url, headers, timeoutMs, {
      begin: (n, flow) => {
        length = n;
        resolve({ body: { length, ended, more: () => flow.more(), cancel: () => flow.stop(new Error('cancelled')) } });
      },
      space: () => {
        piece ??= pieces.take();
        return piece?.subarray(filled);
      },
      took: (n) => {
        filled += n;
        got += n;
        if (filled < piece!.length && got < length) return;
        pieces.put(piece!, filled);
        piece = undefined;
        filled = 0;
      },
    });
    const ended = done.then(() => undefined);
    ended.catch(() => undefined); // a body cancelled unheard rejects into nothing, not an unhandled rejection
    // Before a 200's head, a failure is the GET's; after it, `ended`'s (the answer is settled by then).
    done.then((answer) => {
      if (!('length' in answer)) resolve(answer);
    }, reject);
  });
}

function throwing<T>(answer: T | Error): T {
  if (answer instanceof Error) throw answer;
  return answer;
}

/** The kept-alive connection closed before any byte of the answer came: another one is tried. */
class StaleConnection extends Error {}

/** One response on its way: where its bytes go and what to do once it is whole. */
interface Reading {
  /** The buffer the socket reads into, and how much of it is filled. */
  target: Buffer;
  filled: number;
  /** Set once the head is parsed: the body's length. */
  length?: number;
  /** The most a 200's body may hold, and the buffer it goes into. */
  maxBytes: number;
  body(length: number): Buffer;
  /** A streamed body's sink: `filled` then counts the body's bytes it took, `target` is where the socket reads next. */
  sink?: BodySink;
  /** Whether `target` is the head's buffer, standing in while the sink has no room; bytes read there wait in `held`. */
  spilling?: boolean;
  held?: Buffer;
  done(answer: StraightAnswer | StreamAnswer): void;
  fail(error: Error): void;
}

/** One kept-alive connection to an origin, answering one GET at a time. */
class Connection {
  private readonly head = Buffer.allocUnsafe(HEAD_BYTES);
  private readonly socket: Socket;
  private reading?: Reading;
  /** Whether the answer read last leaves the connection usable for another. */
  private keep = true;
  /** Whether it answered before (a close before any byte of the next answer is then a stale connection, not a refusal). */
  private wasIdle = false;

  private constructor(private readonly origin: URL) {
    this.socket = connect({
      host: origin.hostname.replace(/^\[|\]$/g, ''),
      port: Number(origin.port || 80),
      noDelay: true,
      onread: { buffer: () => this.nextBuffer(), callback: (n) => this.received(n) },
    });
    this.socket.on('error', (e: NodeJS.ErrnoException) => this.lost(new Error(e.code ?? e.message)));
    this.socket.on('close', () => this.lost(new Error('connection closed')));
    this.socket.on('timeout', () => this.socket.destroy(new Error(`no answer within ${this.socket.timeout} ms`)));
  }

  static open(url: URL): Connection {
    return new Connection(url);
  }

  get(url: URL, headers: Record<string, string>, maxBytes: number, timeoutMs: number, into?: Buffer): Promise<StraightAnswer> {
    return this.request(url, headers, timeoutMs, {
      maxBytes,
      body: (length) => (into ? into.subarray(0, length) : Buffer.allocUnsafe(length)),
    });
  }

  stream(url: URL, headers: Record<string, string>, timeoutMs: number, sink: BodySink): Promise<StreamAnswer> {
    return this.request(url, headers, timeoutMs, { maxBytes: Number.MAX_SAFE_INTEGER, body: () => this.head, sink });
  }

  private request<T extends StraightAnswer | StreamAnswer>(
    url: URL,
    headers: Record<string, string>,
    timeoutMs: number,
    how: Pick<Reading, 'maxBytes' | 'body' | 'sink'>,
  ): Promise<T> {
    const lines = [`GET ${url.pathname}${url.search} HTTP/1.1`, `host: ${url.host}`, 'connection: keep-alive'];
    for (const [name, value] of Object.entries(headers)) {
      if (/[\r\n]/.test(name + value)) return Promise.reject(new Error(`header ${name} holds a line break`));
      lines.push(`${name}: ${value}`);
    }
    this.socket.ref();
    // Set once per connection (each call costs a timer's reset): an idle connection times out too, and goes.
    if (this.socket.timeout !== timeoutMs) this.socket.setTimeout(timeoutMs);
    return new Promise<T>((resolve, reject) => {
      this.reading = {
        target: this.head,
        filled: 0,
        ...how,
        done: (answer) => {
          this.reading = undefined;
          this.release();
          resolve(answer as T);
        },
        fail: (error) => {
          this.reading = undefined;
          this.socket.destroy();
          reject(error);
        },
      };
      this.socket.write(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
    });
  }

  /** Where the next read goes: the rest of the response's buffer, or the head's buffer between responses (bytes there then are a protocol error). */
  private nextBuffer(): Buffer {
    const r = this.reading;
    if (r?.sink && r.length !== undefined) return this.roomInSink(r);
    return r && r.filled < r.target.length ? r.target.subarray(r.filled) : this.head;
  }

  /** Returns false to pause the socket (a streamed body's sink has no room). */
  private received(n: number): boolean {
    const r = this.reading;
    if (!r) {
      this.socket.destroy();
      return false;
    }
    if (r.sink && r.length !== undefined) {
      if (r.spilling) return this.toSink(r, this.head.subarray(0, n));
      r.filled += n;
      r.sink.took(n);
      if (this.reading === r && r.filled === r.length) r.done({ length: r.length });
      return this.reading === r || !this.socket.destroyed;
    }
    r.filled += n;
    if (r.length === undefined) return this.parseHead(r);
    if (r.filled === r.length) r.done({ bytes: r.target });
    return true;
  }

  /** Where a streamed body's next read goes: the sink's room, else (until the sink has room again) the head's buffer. */
  private roomInSink(r: Reading): Buffer {
    const left = r.length! - r.filled;
    const room = left > 0 && !r.held ? nonEmpty(r.sink!.space()) : undefined;
    r.spilling = !room;
    r.target = room ? room.subarray(0, Math.min(room.length, left)) : this.head.subarray(0, Math.max(1, Math.min(HEAD_BYTES, left)));
    return r.target;
  }

  /** Bytes of a streamed body read outside the sink, copied into its room; what does not fit is held and the socket paused. */
  private toSink(r: Reading, bytes: Buffer): boolean {
    while (bytes.length > 0) {
      const room = nonEmpty(r.sink!.space());
      if (!room) {
        r.held = bytes;
        return false;
      }
      const n = bytes.copy(room, 0, 0, Math.min(room.length, bytes.length));
      r.filled += n;
      r.sink!.took(n);
      if (this.reading !== r) return false;
      bytes = bytes.subarray(n);
    }
    r.held = undefined;
    if (r.filled === r.length) r.done({ length: r.length });
    return true;
  }

  /** A streamed body's flow: its sink has room again (the held bytes go first), or stops it. */
  private flow(r: Reading): BodyFlow {
    return {
      more: () => {
        // Read on once the held bytes are in: for this body's rest, or (it is whole) as an idle connection does.
        if (this.reading === r && r.held && this.toSink(r, r.held)) this.socket.resume();
      },
      stop: (reason) => {
        if (this.reading === r) r.fail(reason);
      },
    };
  }

  /** Returns false to pause the socket (a streamed body's sink has no room for the bytes that came with the head). */
  private parseHead(r: Reading): boolean {
    const end = r.target.subarray(0, r.filled).indexOf('\r\n\r\n', 0, 'latin1');
    if (end < 0) {
      if (r.filled === r.target.length) r.fail(new Error(`an answer's head of more than ${HEAD_BYTES} bytes`));
      return true;
    }
    const [statusLine = '', ...fields] = r.target.toString('latin1', 0, end).split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? NaN);
    const header = (name: string) =>
      fields
        .find((f) => f.slice(0, name.length + 1).toLowerCase() === `${name}:`)
        ?.slice(name.length + 1)
        .trim();
    if (!Number.isInteger(status)) return failed(r, new Error(`not an HTTP answer: ${statusLine.slice(0, 80)}`));
    this.keep = !/^HTTP\/1\.0/.test(statusLine) && header('connection')?.toLowerCase() !== 'close';
    const rest = r.target.subarray(end + 4, r.filled);
    const location = header('location');
    if (status >= 300 && status < 400 && location) {
      this.keep = false;
      r.done({ location: new URL(location, this.origin).href });
      return true;
    }
    const lengthText = header('content-length');
    const length = lengthText !== undefined && /^\d+$/.test(lengthText) ? Number(lengthText) : NaN;
    const chunked = /chunked/i.test(header('transfer-encoding') ?? '');
    if (status !== 200) {
      this.readText(r, status, length, chunked, rest);
      return true;
    }
    if (!Number.isSafeInteger(length) || length > r.maxBytes)
      return failed(r, new Error(`a blob of ${lengthText ?? 'unknown'} bytes (at most ${r.maxBytes} taken)`));
    if (rest.length > length) return failed(r, new Error(`more than the ${length} bytes announced`));
    if (r.sink) {
      r.length = length;
      r.filled = 0;
      r.sink.begin(length, this.flow(r));
      return this.toSink(r, rest);
    }
    const body = r.body(length);
    rest.copy(body);
    r.target = body;
    r.filled = rest.length;
    r.length = length;
    if (r.filled === length) r.done({ bytes: body });
    return true;
  }

  /**
   * Another status: the start of its text, from the bytes that came with the head (a registry's
   * refusals are short); the connection is kept only when the text came whole.
   */
  private readText(r: Reading, status: number, length: number, chunked: boolean, rest: Buffer): void {
    if (!(Number.isSafeInteger(length) && rest.length === length)) this.keep = false;
    const text = chunked ? dechunked(rest) : rest;
    r.done({ status, text: text.toString('utf8', 0, Math.min(text.length, 300)) });
  }

  private lost(error: Error): void {
    idle.set(
      this.origin.origin,
      (idle.get(this.origin.origin) ?? []).filter((c) => c !== this),
    );
    const r = this.reading;
    if (!r) return;
    this.reading = undefined;
    if (r.length !== undefined) r.fail(new Error(`cut off after ${r.filled} of ${r.length} bytes (${error.message})`));
    else if (r.filled === 0 && this.wasIdle) r.fail(new StaleConnection(error.message));
    else r.fail(error);
  }

  /** Back to the idle connections of its origin, unless the answer said close (or was not read whole). */
  private release(): void {
    const list = idle.get(this.origin.origin) ?? [];
    if (!this.keep || this.socket.destroyed || list.length >= IDLE_PER_ORIGIN) return void this.socket.destroy();
    this.wasIdle = true;
    this.socket.unref();
    list.push(this);
    idle.set(this.origin.origin, list);
  }
}

function nonEmpty(buffer: Buffer | undefined): Buffer | undefined {
  return buffer?.length ? buffer : undefined;
}

/** `reading` failed for `error`: no more reads. */
function failed(r: Reading, error: Error): false {
  r.fail(error);
  return false;
}

/** The data of a chunked body's chunks that are in `bytes` (`<hex size>\r\n<data>\r\n`…), as far as they go. */
function dechunked(bytes: Buffer): Buffer {
  const pieces: Buffer[] = [];
  for (let at = 0; at < bytes.length;) {
    const line = bytes.indexOf('\r\n', at, 'latin1');
    const size = line < 0 ? NaN : parseInt(bytes.toString('latin1', at, line), 16);
    if (!(size > 0)) break;
    pieces.push(bytes.subarray(line + 2, line + 2 + size));
    at = line + 2 + size + 2;
  }
  return Buffer.concat(pieces);
}
