import { connect, type Socket } from 'node:net';

/**
 * GETs over plain HTTP/1.1 whose body the kernel reads straight into the caller's buffer (a socket
 * with `onread`): no buffer per socket read, no copy of each piece into the chunk, no HTTP parser
 * on the body. node:http gives every read its own 64 KiB buffer, and those buffers alone had the
 * garbage collector run a full collection every few MiB of a mount. For blob GETs only: a
 * response whose body is not sized by Content-Length is read as text and its connection closed.
 * `getStreamed` reads a body of any size the same way, into buffers its caller lends and reuses.
 */

/** What a GET answered: a 200's body, a redirect's target, or another status and the start of its text. */
export type StraightAnswer = { bytes: Buffer } | { location: string } | { status: number; text: string };

/**
 * Where a streamed body goes: buffers its reader lends, one after another, each handed back with
 * the bytes read into it. Reading pauses while none is free, until the body's `more()`.
 */
export interface BodyPieces {
  /** A buffer for the next bytes (16 KiB or more: what came with the head is copied into it), or undefined while none is free. */
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

/** What a streamed GET answered: a 200's body on its way, a redirect's target, or another status and the start of its text. */
export type StreamedAnswer = { body: StreamedBody } | Exclude<StraightAnswer, { bytes: Buffer }>;

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
  const answer = await onConnection(url, (c) => c.get(url, headers, most, timeoutMs, { into }));
  if ('body' in answer) throw new Error('a streamed answer to a GET into a buffer'); // never: no pieces were given
  return answer;
}

/**
 * GETs `url` (http: only): a 200's body, of any length its Content-Length says, read into the
 * buffers `pieces` lends as it comes; the answer comes with the head. A connection kept alive
 * that the server closed before answering is replaced once.
 */
export async function getStreamed(
  url: URL,
  headers: Record<string, string>,
  timeoutMs: number,
  pieces: BodyPieces,
): Promise<StreamedAnswer> {
  const answer = await onConnection(url, (c) => c.get(url, headers, Number.MAX_SAFE_INTEGER, timeoutMs, { pieces }));
  if ('bytes' in answer) throw new Error('a body in one buffer to a streamed GET'); // never: a 200 streams
  return answer;
}

/** `ask` on an idle connection to the origin, or on a new one when there is none or it turns out closed. */
async function onConnection<T>(url: URL, ask: (c: Connection) => Promise<T>): Promise<T> {
  const reused = idle.get(url.origin)?.pop();
  if (reused) {
    const answer = await ask(reused).catch((e: Error) => e);
    if (!(answer instanceof StaleConnection)) {
      if (answer instanceof Error) throw answer;
      return answer;
    }
  }
  return ask(Connection.open(url));
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
  /** Set for a streamed GET: where a 200's body goes. */
  pieces?: BodyPieces;
  done(answer: StraightAnswer): void;
  /** A 200 to a streamed GET: its body comes on, the connection stays this answer's until it ends. */
  streams(body: StreamedBody): void;
  fail(error: Error): void;
}

/** A streamed body being read: the piece it reads into and how far. */
interface Streaming {
  pieces: BodyPieces;
  length: number;
  /** Bytes of the body read so far. */
  got: number;
  /** The buffer reads go into (absent while paused), and how much of it is filled. */
  piece?: Buffer;
  filled: number;
  settle: { resolve: () => void; reject: (e: Error) => void };
}

/** One kept-alive connection to an origin, answering one GET at a time. */
class Connection {
  private readonly head = Buffer.allocUnsafe(HEAD_BYTES);
  private readonly socket: Socket;
  private reading?: Reading;
  private streaming?: Streaming;
  /** Whether the read under way goes into the head's buffer (a streamed body's first read after a pause does). */
  private intoHead = true;
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

  get(
    url: URL,
    headers: Record<string, string>,
    maxBytes: number,
    timeoutMs: number,
    { into, pieces }: { into?: Buffer | undefined; pieces?: BodyPieces },
  ): Promise<StraightAnswer | { body: StreamedBody }> {
    const lines = [`GET ${url.pathname}${url.search} HTTP/1.1`, `host: ${url.host}`, 'connection: keep-alive'];
    for (const [name, value] of Object.entries(headers)) {
      if (/[\r\n]/.test(name + value)) return Promise.reject(new Error(`header ${name} holds a line break`));
      lines.push(`${name}: ${value}`);
    }
    this.socket.ref();
    // Set once per connection (each call costs a timer's reset): an idle connection times out too, and goes.
    if (this.socket.timeout !== timeoutMs) this.socket.setTimeout(timeoutMs);
    return new Promise<StraightAnswer | { body: StreamedBody }>((resolve, reject) => {
      this.reading = {
        target: this.head,
        filled: 0,
        maxBytes,
        body: (length) => (into ? into.subarray(0, length) : Buffer.allocUnsafe(length)),
        ...(pieces ? { pieces } : {}),
        done: (answer) => {
          this.reading = undefined;
          this.release();
          resolve(answer);
        },
        streams: (body) => {
          this.reading = undefined;
          resolve({ body });
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
    const s = this.streaming;
    this.intoHead = !s?.piece;
    if (s?.piece) return s.piece.subarray(s.filled, Math.min(s.piece.length, s.filled + s.length - s.got));
    const r = this.reading;
    const target = r && r.filled < r.target.length ? r.target.subarray(r.filled) : this.head;
    this.intoHead = target === this.head;
    return target;
  }

  private received(n: number): boolean {
    const s = this.streaming;
    // Node asks for the next read's buffer even as a read pauses the socket: with no piece free
    // then, the read after `more` went into the head's buffer, and is copied on.
    if (s) return this.intoHead ? this.streamCopy(s, this.head.subarray(0, n)) : this.streamed(s, n);
    const r = this.reading;
    if (!r) {
      this.socket.destroy();
      return false;
    }
    r.filled += n;
    if (r.length === undefined) this.parseHead(r);
    else if (r.filled === r.length) r.done({ bytes: r.target });
    // The head's read may have filled every buffer the body's reader lent.
    return !this.streaming || this.streaming.piece !== undefined;
  }

  /** A 200 to a streamed GET: the bytes that came with the head go into the first piece, the rest follows there. */
  private stream(r: Reading, pieces: BodyPieces, length: number, rest: Buffer): void {
    let settle!: Streaming['settle'];
    const ended = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    ended.catch(() => undefined); // a body cancelled unheard rejects into nothing, not an unhandled rejection
    const s: Streaming = { pieces, length, got: 0, filled: 0, settle };
    r.streams({ length, ended, more: () => this.more(s), cancel: () => this.socket.destroy() });
    if (length === 0) return this.ended(s);
    this.streaming = s;
    if (this.streamCopy(s, rest) && this.streaming === s) s.piece ??= pieces.take();
  }

  /** Bytes of a streamed body read elsewhere (with the head, or after a pause) copied into its pieces; false pauses reading. */
  private streamCopy(s: Streaming, bytes: Buffer): boolean {
    if (bytes.length > s.length - s.got) {
      this.socket.destroy(new Error(`more than the ${s.length} bytes announced`));
      return false;
    }
    for (let at = 0; at < bytes.length;) {
      s.piece ??= s.pieces.take();
      if (!s.piece) {
        this.socket.destroy(new Error('no buffer free for the body'));
        return false;
      }
      const n = bytes.copy(s.piece, s.filled, at);
      at += n;
      this.streamed(s, n);
    }
    return this.streaming !== s || s.piece !== undefined;
  }

  /** `n` more bytes of a streamed body are in its piece: a full piece (or the body's last) is put; false pauses reading. */
  private streamed(s: Streaming, n: number): boolean {
    s.filled += n;
    s.got += n;
    const piece = s.piece!;
    if (s.got < s.length && s.filled < piece.length) return true;
    s.piece = undefined;
    const filled = s.filled;
    s.filled = 0;
    s.pieces.put(piece, filled);
    if (s.got === s.length) {
      this.ended(s);
      return true;
    }
    s.piece = s.pieces.take();
    return s.piece !== undefined;
  }

  private ended(s: Streaming): void {
    this.streaming = undefined;
    this.release();
    s.settle.resolve();
  }

  /** The body's reader freed a buffer: reading resumes if it had paused for want of one. */
  private more(s: Streaming): void {
    if (this.streaming !== s || s.piece) return;
    s.piece = s.pieces.take();
    if (s.piece) this.socket.resume();
  }

  private parseHead(r: Reading): void {
    const end = r.target.subarray(0, r.filled).indexOf('\r\n\r\n', 0, 'latin1');
    if (end < 0) {
      if (r.filled === r.target.length) r.fail(new Error(`an answer's head of more than ${HEAD_BYTES} bytes`));
      return;
    }
    const [statusLine = '', ...fields] = r.target.toString('latin1', 0, end).split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? NaN);
    const header = (name: string) =>
      fields
        .find((f) => f.slice(0, name.length + 1).toLowerCase() === `${name}:`)
        ?.slice(name.length + 1)
        .trim();
    if (!Number.isInteger(status)) return r.fail(new Error(`not an HTTP answer: ${statusLine.slice(0, 80)}`));
    this.keep = !/^HTTP\/1\.0/.test(statusLine) && header('connection')?.toLowerCase() !== 'close';
    const rest = r.target.subarray(end + 4, r.filled);
    const location = header('location');
    if (status >= 300 && status < 400 && location) {
      this.keep = false;
      return r.done({ location: new URL(location, this.origin).href });
    }
    const lengthText = header('content-length');
    const length = lengthText !== undefined && /^\d+$/.test(lengthText) ? Number(lengthText) : NaN;
    const chunked = /chunked/i.test(header('transfer-encoding') ?? '');
    if (status !== 200) return this.readText(r, status, length, chunked, rest);
    if (!Number.isSafeInteger(length) || length > r.maxBytes)
      return r.fail(new Error(`a blob of ${lengthText ?? 'unknown'} bytes (at most ${r.maxBytes} taken)`));
    if (rest.length > length) return r.fail(new Error(`more than the ${length} bytes announced`));
    if (r.pieces) return this.stream(r, r.pieces, length, rest);
    const body = r.body(length);
    rest.copy(body);
    r.target = body;
    r.filled = rest.length;
    r.length = length;
    if (r.filled === length) r.done({ bytes: body });
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
    const s = this.streaming;
    if (s) {
      this.streaming = undefined;
      s.settle.reject(new Error(`cut off after ${s.got} of ${s.length} bytes (${error.message})`));
    }
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
