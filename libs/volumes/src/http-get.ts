import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { getStraight } from './http-into.js';

/** Kept-alive connections to the store: a mount asks for thousands of blobs, one TCP handshake each would cost more than the bytes. */
const agents = { http: new HttpAgent({ keepAlive: true, maxSockets: 64 }), https: new HttpsAgent({ keepAlive: true, maxSockets: 64 }) };

/** The answer to a GET: the body when 200, else the status and the start of its text. */
export type GetAnswer = { bytes: Buffer } | { status: number; text: string };

/**
 * The answer to `method` at `url`, its body unread, once it is not a redirect: redirects (a
 * storage backend's signed URL) are followed, at most 5, without the authorization header. A
 * network error rejects with its code.
 */
function answerOf(
  method: 'GET' | 'HEAD',
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
  hops = 0,
): Promise<IncomingMessage> {
  const https = url.startsWith('https:');
  return new Promise((resolve, reject) => {
    const options = { method, headers, agent: https ? agents.https : agents.http, timeout: timeoutMs };
    const req = (https ? httpsRequest : httpRequest)(url, options, (res) => {
      const location = res.headers.location;
      if (res.statusCode && res.statusCode >= 300 && res.statusCode < 400 && location && hops < 5) {
        res.resume();
        resolve(answerOf(method, new URL(location, url).href, {}, timeoutMs, hops + 1));
      } else resolve(res);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (e: NodeJS.ErrnoException) => reject(new Error(e.code ?? e.message)));
    req.end();
  });
}

/** GETs `url` and hands a 200 to `read`; another final answer is its status and the start of its text. */
async function getFollowing<T>(
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
  read: (res: IncomingMessage) => Promise<T>,
  hops = 0,
): Promise<T | { status: number; text: string }> {
  const res = await answerOf('GET', url, headers, timeoutMs, hops);
  if (res.statusCode !== 200) return { status: res.statusCode ?? 0, text: await textOf(res) };
  return read(res);
}

/**
 * HEADs `url` over kept-alive connections (a site cache asks its store once per request; fetch
 * cost it several times the CPU): the final status, the size it announces, and a refusal's
 * challenge. Redirects are followed as a GET's are.
 */
export async function headOf(
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<{ status: number; size: number; challenge?: string }> {
  const res = await answerOf('HEAD', url, headers, timeoutMs);
  res.resume();
  const challenge = res.headers['www-authenticate'];
  return { status: res.statusCode ?? 0, size: Number(res.headers['content-length']), ...(challenge ? { challenge } : {}) };
}

/**
 * GETs `url` into one buffer sized by the answer's Content-Length, refusing a body over `maxBytes`
 * or one cut short. The buffer is the start of `into` when given (a caller's reused buffer: a body
 * larger than it is refused), else a new one. Over plain HTTP the socket reads straight into it
 * (http-into.ts); over HTTPS, and after a redirect, node:https's pieces are copied into it.
 */
export async function getInto(
  url: string,
  headers: Record<string, string>,
  maxBytes: number,
  timeoutMs: number,
  into?: Buffer,
): Promise<GetAnswer> {
  const most = into ? Math.min(maxBytes, into.length) : maxBytes;
  const read = async (res: IncomingMessage) => ({ bytes: await bodyOf(res, most, into) });
  const target = new URL(url);
  if (target.protocol !== 'http:') return getFollowing(url, headers, timeoutMs, read);
  const got = await getStraight(target, headers, most, timeoutMs, into);
  return 'location' in got ? getFollowing(got.location, {}, timeoutMs, read, 1) : got;
}

/**
 * GETs `url` and answers its body, unread, when 200 (the caller reads it, or destroys it), else
 * the status and the start of its text.
 */
export function getBody(
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<{ body: IncomingMessage } | { status: number; text: string }> {
  return getFollowing(url, headers, timeoutMs, (res) => Promise.resolve({ body: res }));
}

function bodyOf(res: IncomingMessage, maxBytes: number, into?: Buffer): Promise<Buffer> {
  const length = Number(res.headers['content-length']);
  return new Promise((resolve, reject) => {
    if (!Number.isSafeInteger(length) || length > maxBytes) {
      res.destroy();
      return reject(new Error(`a blob of ${res.headers['content-length'] ?? 'unknown'} bytes (at most ${maxBytes} taken)`));
    }
    const bytes = into ? into.subarray(0, length) : Buffer.allocUnsafe(length);
    let filled = 0;
    res.on('data', (piece: Buffer) => {
      if (filled + piece.length > length) return res.destroy(new Error(`more than the ${length} bytes announced`));
      piece.copy(bytes, filled);
      filled += piece.length;
    });
    res.on('error', (e: NodeJS.ErrnoException) => reject(new Error(e.code ?? e.message)));
    res.on('aborted', () => reject(new Error(`cut off after ${filled} of ${length} bytes`)));
    res.on('end', () => (filled === length ? resolve(bytes) : reject(new Error(`cut off after ${filled} of ${length} bytes`))));
    res.on('close', () => {
      if (filled !== length) reject(new Error(`cut off after ${filled} of ${length} bytes`));
    });
  });
}

async function textOf(res: IncomingMessage): Promise<string> {
  let text = '';
  for await (const piece of res) if (text.length < 300) text += String(piece);
  return text.slice(0, 300);
}
