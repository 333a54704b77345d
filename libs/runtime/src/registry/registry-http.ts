import { createHash } from 'node:crypto';
import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
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
      if (res.statusCode === 401 && attempt === 0 && used?.startsWith('Bearer ') && !this.access?.token) {
        res.resume();
        if (this.authorization === used) this.origin = undefined; // one renewal for the layers that failed together
        continue;
      }
      throw new ImageError(this.image, `${from} answered ${res.statusCode} for ${path}: ${await textOf(res)}`);
    }
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

/** The start of an answer's body, for an error (the registry's `{"errors":[{"code":"UNAUTHORIZED",…}]}`). */
async function textOf(res: IncomingMessage, max = 300): Promise<string> {
  let text = '';
  for await (const piece of res as AsyncIterable<Buffer>) if (text.length < max) text += piece.toString();
  return text.slice(0, max).trim();
}
