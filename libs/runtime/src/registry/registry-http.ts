import { createHash } from 'node:crypto';
import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { type BodyPieces, getStreamed, type StreamedBody } from '#tern/volumes';
import { ImageError } from '../errors.js';
import type { RegistryAccess } from './skopeo.js';

/** Kept-alive connections: a pull asks for a manifest, a config and every layer of one registry. */
const agents = {
  http: new HttpAgent({ keepAlive: true, maxSockets: 16 }),
  https: new HttpsAgent({ keepAlive: true, maxSockets: 16 }),
  insecure: new HttpsAgent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false }),
};

const TIMEOUT_MS = 60_000;

const CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'no such host',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
};

/** `connection refused (ECONNREFUSED)`: what a network error means, with its code. */
export function networkReason(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err.code ? `${CODES[err.code] ?? err.message} (${err.code})` : err.message;
}

/**
 * The distribution API of one repository as `skopeo` reaches it with the same RegistryAccess:
 * verified TLS, or for an `insecure` registry TLS without checks falling back to plain HTTP; a
 * token in hand sent as is, else the registry's challenge answered (Basic, or a Bearer token from
 * the realm it names, asked with the user and password).
 */
export class RegistryHttp {
  private origin?: string;
  private authorization?: string;

  constructor(
    private readonly image: string,
    private readonly host: string,
    private readonly repository: string,
    private readonly access: RegistryAccess | undefined,
  ) {}

  /** `the registry 127.0.0.1:5000`: how errors name it. */
  get name(): string {
    return `the registry ${this.host}`;
  }

  /**
   * A 200 answer to GET `/v2/<repository>/<path>`; an ImageError naming the registry otherwise. A
   * 401 to a token from the realm (one that expired during a long pull) asks for a new one, once.
   */
  async get(path: string, headers: Record<string, string> = {}): Promise<IncomingMessage> {
    for (let attempt = 0; ; attempt++) {
      await this.connect();
      const used = this.authorization;
      const { res, from } = await this.fetch(path, { ...headers, ...(used ? { authorization: used } : {}) });
      if (res.statusCode === 200) return res;
      if (this.renews(res.statusCode, attempt, used)) {
        res.resume();
        continue;
      }
      throw new ImageError(this.image, `${from} answered ${res.statusCode} for ${path}: ${await textOf(res)}`);
    }
  }

  /**
   * A blob of `size` bytes read into `pieces` as it comes. From a plain-HTTP registry the socket
   * reads straight into them (no buffer per read, no HTTP parser on the body: http-into.ts); over
   * HTTPS, through a site cache and after a redirect, node:http's chunks are copied in.
   */
  async stream(path: string, pieces: BodyPieces, size: number): Promise<StreamedBody> {
    for (let attempt = 0; ; attempt++) {
      await this.connect();
      if (this.access?.siteCache || !this.origin?.startsWith('http:')) break;
      const used = this.authorization;
      const url = new URL(`${this.origin}/v2/${this.repository}/${path}`);
      const got = await getStreamed(url, used ? { authorization: used } : {}, TIMEOUT_MS, pieces).catch((e: unknown) => {
        throw new ImageError(this.image, `cannot reach ${this.name}: ${networkReason(e)}`, { cause: e });
      });
      if ('body' in got) return got.body;
      if ('location' in got) break; // node:http follows it, to a storage backend that is often HTTPS
      if (this.renews(got.status, attempt, used)) continue;
      throw new ImageError(this.image, `${this.name} answered ${got.status} for ${path}: ${got.text}`);
    }
    return streamedFrom(await this.get(path), pieces, size);
  }

  /** A 401 to a token from the realm (one that expired during a long pull): asks for a new one, once. */
  private renews(status: number | undefined, attempt: number, used: string | undefined): boolean {
    if (status !== 401 || attempt !== 0 || !used?.startsWith('Bearer ') || this.access?.token) return false;
    if (this.authorization === used) this.origin = undefined; // one renewal for the layers that failed together
    return true;
  }

  /**
   * A blob through the site cache where there is one, with the same token (the cache asks the
   * registry whether it may serve it, and the caller checks the digest); everything else, and a
   * blob whose cache cannot be reached, from the registry.
   */
  private async fetch(path: string, headers: Record<string, string>): Promise<{ res: IncomingMessage; from: string }> {
    const via = this.access?.siteCache;
    if (via && path.startsWith('blobs/')) {
      const res = await this.send(`${via.url}/v2/${this.repository}/${path}`, headers).catch((e: ImageError) => {
        via.unreachable?.(`the site cache ${via.url} cannot be reached (${networkReason(e.cause)}); pulling from ${this.name}`);
        return undefined;
      });
      if (res) return { res, from: `the site cache ${via.url} of ${this.name}` };
    }
    return { res: await this.send(`${this.origin}/v2/${this.repository}/${path}`, headers), from: this.name };
  }

  /** A small JSON document (manifest, config) whose bytes must hash to `digest`. */
  async getVerified(path: string, digest: string, accept?: string): Promise<Buffer> {
    const res = await this.get(path, accept ? { accept } : {});
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of res as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > 16 << 20) throw new ImageError(this.image, `${this.name} sent more than 16 MiB for ${path}`);
      chunks.push(c);
    }
    const bytes = Buffer.concat(chunks);
    const got = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    if (got !== digest) throw new ImageError(this.image, `${this.name} served ${path} with digest ${got}, not ${digest}`);
    return bytes;
  }

  /** Picks the scheme and the credentials once per pull, from the registry's answer to `GET /v2/`. */
  private async connect(): Promise<void> {
    if (this.origin) return;
    let origin = `https://${this.host}`;
    let res = await this.send(`${origin}/v2/`, {}).catch(async (e: unknown) => {
      if (!this.access?.insecure) throw e;
      origin = `http://${this.host}`;
      return this.send(`${origin}/v2/`, {});
    });
    res.resume();
    this.origin = origin;
    if (this.access?.token) {
      this.authorization = `Bearer ${this.access.token}`;
      return;
    }
    const challenge = String(res.headers['www-authenticate'] ?? '');
    if (res.statusCode !== 401 || !this.access?.username) return;
    const basic = `Basic ${Buffer.from(`${this.access.username}:${this.access.password ?? ''}`).toString('base64')}`;
    if (!/^Bearer\s/i.test(challenge)) {
      this.authorization = basic;
      return;
    }
    const params = Object.fromEntries([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    if (!params.realm) throw new ImageError(this.image, `${this.name} asked for a token without saying where to get one`);
    const realm = new URL(params.realm);
    if (params.service) realm.searchParams.set('service', params.service);
    realm.searchParams.set('scope', `repository:${this.repository}:pull`);
    res = await this.send(realm.href, { authorization: basic });
    const body = JSON.parse((await textOf(res, 1 << 20)) || '{}') as { token?: string; access_token?: string };
    const token = body.token ?? body.access_token;
    if (res.statusCode !== 200 || !token)
      throw new ImageError(this.image, `the token service of ${this.name} (${realm.origin}) refused: ${res.statusCode} unauthorized`);
    this.authorization = `Bearer ${token}`;
  }

  /** One GET, redirects followed (to a storage backend: without our authorization). */
  private send(url: string, headers: Record<string, string>, hops = 0): Promise<IncomingMessage> {
    const https = url.startsWith('https:');
    const agent = https ? (this.access?.insecure ? agents.insecure : agents.https) : agents.http;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(url, { headers, agent, timeout: TIMEOUT_MS }, (res) => {
        const location = res.headers.location;
        if (res.statusCode && res.statusCode >= 300 && res.statusCode < 400 && location && hops < 5) {
          res.resume();
          const next = new URL(location, url);
          resolve(this.send(next.href, next.host === new URL(url).host ? headers : {}, hops + 1));
        } else resolve(res);
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${TIMEOUT_MS} ms`), { code: 'ETIMEDOUT' })));
      req.on('error', (e) => reject(new ImageError(this.image, `cannot reach ${this.name}: ${networkReason(e)}`, { cause: e })));
      req.end();
    });
  }
}

/**
 * node:http's chunks of a 200 copied into the pieces, a body of `size` bytes: the same
 * StreamedBody a socket reading into them gives. The answer pauses while no piece is free.
 */
function streamedFrom(res: IncomingMessage, pieces: BodyPieces, size: number): StreamedBody {
  const announced = res.headers['content-length'];
  let piece: Buffer | undefined;
  let filled = 0;
  let got = 0;
  let pending: Buffer | undefined;
  let settle!: { resolve: () => void; reject: (e: Error) => void };
  let settled = false;
  const ended = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  ended.catch(() => undefined); // a body cancelled unheard rejects into nothing, not an unhandled rejection
  const finish = (error?: Error) => {
    if (settled) return;
    settled = true;
    if (error) {
      res.destroy();
      settle.reject(error);
    } else settle.resolve();
  };
  const cut = (reason: string) => finish(new Error(`cut off after ${got} of ${size} bytes (${reason})`));
  const put = () => {
    pieces.put(piece!, filled);
    piece = undefined;
    filled = 0;
  };
  /** Copies what came into pieces while there are free ones; pauses the answer when there are none. */
  const pump = () => {
    while (pending) {
      piece ??= pieces.take();
      if (!piece) return void res.pause();
      const n = pending.copy(piece, filled);
      filled += n;
      got += n;
      pending = n < pending.length ? pending.subarray(n) : undefined;
      if (got > size) return cut(`more than the ${size} bytes announced`);
      if (filled === piece.length) put();
    }
    res.resume();
  };
  if (announced !== undefined && Number(announced) !== size) finish(new Error(`an answer of ${announced} bytes, not ${size}`));
  res.on('data', (chunk: Buffer) => {
    pending = chunk;
    pump();
  });
  res.on('end', () => {
    if (piece && filled) put();
    if (got === size) finish();
    else cut('the answer ended');
  });
  res.on('aborted', () => cut('aborted'));
  res.on('close', () => cut('connection closed'));
  res.on('error', (e: NodeJS.ErrnoException) => cut(e.code ?? e.message));
  return {
    length: size,
    ended,
    more: () => {
      if (pending) pump();
    },
    cancel: () => cut('cancelled'),
  };
}

/** The start of an answer's body, for an error (the registry's `{"errors":[{"code":"UNAUTHORIZED",…}]}`). */
async function textOf(res: IncomingMessage, max = 300): Promise<string> {
  let text = '';
  for await (const piece of res as AsyncIterable<Buffer>) if (text.length < max) text += piece.toString();
  return text.slice(0, max).trim();
}
