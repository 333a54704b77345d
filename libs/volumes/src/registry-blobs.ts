/**
 * The blob API of an OCI distribution registry (distribution 2.8 and later) for one repository,
 * with a bearer token the gateway signed: what volume chunks are stored as. Framework-free, used
 * by the gateway (files put through the API, commits checked) and by agents (mounts, commits).
 */

/** One repository of a registry and a token good for it (pull, or pull and push). */
export interface BlobGrant {
  /** `http(s)://host[:port]` */
  readonly url: string;
  /** `volumes/<workspace id>/<volume id>` */
  readonly repository: string;
  readonly token: string;
}

/** The registry answered something else than the blob API promises; says which registry and what. */
export class BlobStoreError extends Error {
  override name = 'BlobStoreError';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/**
 * Blobs of one repository. `grant` is asked again (`fresh: true`) once when the registry answers
 * 401, so a token that expired during a long mount or commit is renewed rather than failing it.
 */
export class RegistryBlobs {
  private current?: Promise<BlobGrant>;

  constructor(
    private readonly grant: (fresh: boolean) => Promise<BlobGrant>,
    private readonly timeoutMs = 300_000,
  ) {}

  /** The blob's size when the repository holds it, undefined when not. */
  async size(hex: string): Promise<number | undefined> {
    const res = await this.call('HEAD', (g) => blobUrl(g, hex));
    if (res.status === 404) return undefined;
    if (!res.ok) throw await this.refusal(res, `the size of blob ${hex}`);
    return Number(res.headers.get('content-length'));
  }

  /** The blob's bytes as the registry sends them (a redirect to the storage backend is followed); the caller checks the digest. */
  async open(hex: string): Promise<ReadableStream<Uint8Array>> {
    const res = await this.call('GET', (g) => blobUrl(g, hex));
    if (!res.ok || !res.body) throw await this.refusal(res, `blob ${hex}`);
    return res.body;
  }

  /** Uploads the blob in one request (a monolithic upload) unless the repository holds it already; whether it was sent. */
  async put(hex: string, data: Uint8Array): Promise<boolean> {
    if ((await this.size(hex)) !== undefined) return false;
    const started = await this.call('POST', (g) => `${g.url}/v2/${g.repository}/blobs/uploads/`);
    if (started.status !== 202) throw await this.refusal(started, `an upload of blob ${hex}`);
    const location = started.headers.get('location');
    if (!location) throw new BlobStoreError(`${await this.where()} started an upload of blob ${hex} without a Location`);
    const base = await this.grantNow();
    const target = new URL(location, base.url);
    target.searchParams.set('digest', `sha256:${hex}`);
    const done = await this.call('PUT', () => target.href, data);
    if (done.status !== 201) throw await this.refusal(done, `blob ${hex}`);
    return true;
  }

  /** Pushes an OCI manifest under `tag`; its digest as the registry names it. */
  async putManifest(tag: string, manifest: object, mediaType: string): Promise<string> {
    const res = await this.call('PUT', (g) => `${g.url}/v2/${g.repository}/manifests/${tag}`, Buffer.from(JSON.stringify(manifest)), {
      'content-type': mediaType,
    });
    if (res.status !== 201) throw await this.refusal(res, `manifest ${tag}`);
    return res.headers.get('docker-content-digest') ?? '';
  }

  /** The manifest under `tag`, or undefined when there is none. */
  async manifest<T>(tag: string, mediaType: string): Promise<T | undefined> {
    const res = await this.call('GET', (g) => `${g.url}/v2/${g.repository}/manifests/${tag}`, undefined, { accept: mediaType });
    if (res.status === 404) return undefined;
    if (!res.ok) throw await this.refusal(res, `manifest ${tag}`);
    return (await res.json()) as T;
  }

  private grantNow(fresh = false): Promise<BlobGrant> {
    if (fresh || !this.current) {
      this.current = this.grant(fresh);
      // A failed grant is asked again next time rather than kept.
      this.current.catch(() => (this.current = undefined));
    }
    return this.current;
  }

  private async call(
    method: string,
    url: (g: BlobGrant) => string,
    body?: Uint8Array,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      const g = await this.grantNow(attempt > 0);
      const target = url(g);
      let res: Response;
      try {
        res = await fetch(target, {
          method,
          headers: {
            authorization: `Bearer ${g.token}`,
            ...(body ? { 'content-type': 'application/octet-stream', 'content-length': String(body.length) } : {}),
            ...headers,
          },
          body,
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (e) {
        const err = e as Error & { cause?: { code?: string; message?: string } };
        throw new BlobStoreError(`cannot reach the volume store ${g.url}: ${err.cause?.code ?? err.cause?.message ?? err.message}`);
      }
      if (res.status !== 401 || attempt > 0) return res;
      await res.body?.cancel();
    }
  }

  private async where(): Promise<string> {
    const g = await this.grantNow();
    return `the volume store ${g.url} (${g.repository})`;
  }

  private async refusal(res: Response, what: string): Promise<BlobStoreError> {
    const text = res.body ? (await res.text().catch(() => '')).slice(0, 300) : '';
    return new BlobStoreError(`${await this.where()} answered ${res.status} for ${what}${text ? `: ${text}` : ''}`, res.status);
  }
}

function blobUrl(g: BlobGrant, hex: string): string {
  return `${g.url}/v2/${g.repository}/blobs/sha256:${hex}`;
}

/** The repository of a volume's chunks: one per volume under its workspace's namespace. */
export function volumeRepository(workspaceId: string, volumeId: string): string {
  return `volumes/${workspaceId}/${volumeId}`;
}
