import { sha256Hex } from './chunks.js';
import { type GetAnswer, getInto } from './http-get.js';

/**
 * The blob API of an OCI distribution registry (distribution 2.8 and later) for one repository,
 * with a bearer token the gateway signed: what volume chunks are stored as. Framework-free, used
 * by the gateway (files put through the API, commits checked) and by agents (mounts, commits).
 */

/** A site cache (site-cache.ts) that blob reads go through; `unreachable` hears when one went to the store instead. */
export interface SiteCacheUse {
  url: string;
  unreachable?(message: string): void;
}

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
    private readonly siteCache?: SiteCacheUse,
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

  /**
   * The blob's bytes in one buffer of at most `maxBytes` (a larger blob is refused before it is
   * read), over node:http: the registry's bytes land in the buffer as they arrive, without a web
   * stream between (undici's fetch body costs about a fifth more CPU per byte). `into`: a buffer
   * of the caller's to read into (its start is answered), which the caller reuses once done with
   * the bytes. The caller checks the digest.
   */
  async read(hex: string, maxBytes: number, into?: Buffer): Promise<Buffer> {
    for (let attempt = 0; ; attempt++) {
      const g = await this.grantNow(attempt > 0);
      const got = await this.readOnce(g, hex, maxBytes, into);
      if ('bytes' in got) return got.bytes;
      if (got.status === 401 && attempt === 0) continue;
      throw new BlobStoreError(
        `${got.from} (${g.repository}) answered ${got.status} for blob ${hex}${got.text ? `: ${got.text}` : ''}`,
        got.status,
      );
    }
  }

  /**
   * Through the site cache where there is one, with the same token (the cache asks the store
   * whether it may serve it); straight from the store when the cache cannot be reached, so a
   * site whose cache is down still mounts, over its uplink.
   */
  private async readOnce(g: BlobGrant, hex: string, maxBytes: number, into?: Buffer): Promise<GetAnswer & { from: string }> {
    const headers = { authorization: `Bearer ${g.token}` };
    if (this.siteCache) {
      const via = this.siteCache;
      const got = await getInto(`${via.url}/v2/${g.repository}/blobs/sha256:${hex}`, headers, maxBytes, this.timeoutMs, into).catch(
        (e: Error) => {
          via.unreachable?.(`the site cache ${via.url} cannot be reached (${e.message}); reading from the volume store ${g.url}`);
          return undefined;
        },
      );
      if (got) return { ...got, from: `the site cache ${via.url} of the volume store ${g.url}` };
    }
    const got = await getInto(blobUrl(g, hex), headers, maxBytes, this.timeoutMs, into).catch((e: Error) => {
      throw new BlobStoreError(`cannot read blob ${hex} from the volume store ${g.url}: ${e.message}`);
    });
    return { ...got, from: `the volume store ${g.url}` };
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

  /**
   * Pushes an OCI manifest under `tag`; the registry refuses it (400, MANIFEST_BLOB_UNKNOWN) when
   * the repository lacks a blob it names.
   */
  async putManifest(tag: string, manifest: object): Promise<void> {
    const body = Buffer.from(JSON.stringify(manifest));
    const res = await this.call('PUT', (g) => `${g.url}/v2/${g.repository}/manifests/${tag}`, body, {
      'content-type': OCI_MANIFEST,
    });
    if (res.status !== 201) throw await this.refusal(res, `manifest ${tag}`);
  }

  /** The repository's tags (none for a repository never pushed to). */
  async tags(): Promise<string[]> {
    const res = await this.call('GET', (g) => `${g.url}/v2/${g.repository}/tags/list?n=10000`);
    if (res.status === 404) return [];
    if (!res.ok) throw await this.refusal(res, 'its tags');
    return ((await res.json()) as { tags?: string[] | null }).tags ?? [];
  }

  /** Deletes the manifest under `tag` (every tag naming it goes with it); nothing when there is none. */
  async deleteManifest(tag: string): Promise<void> {
    const head = await this.call('HEAD', (g) => `${g.url}/v2/${g.repository}/manifests/${tag}`, undefined, { accept: OCI_MANIFEST });
    if (head.status === 404) return;
    const digest = head.headers.get('docker-content-digest');
    if (!head.ok || !digest) throw await this.refusal(head, `manifest ${tag}`);
    const res = await this.call('DELETE', (g) => `${g.url}/v2/${g.repository}/manifests/${digest}`);
    if (res.status !== 202 && res.status !== 404) throw await this.refusal(res, `the deletion of manifest ${tag}`);
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

const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';

/** The empty JSON object: the config of an artifact manifest that has none. */
export const EMPTY_CONFIG = { mediaType: 'application/vnd.oci.empty.v1+json', bytes: Buffer.from('{}') } as const;

/**
 * A volume version as an OCI artifact manifest: every chunk of its files once, as a layer. Its
 * tag keeps those blobs referenced, so the registry's garbage collection keeps them and frees
 * what only deleted versions and volumes held.
 */
export function volumeVersionManifest(version: number, chunks: ReadonlyMap<string, number>): object {
  const config = { mediaType: EMPTY_CONFIG.mediaType, digest: `sha256:${sha256Hex(EMPTY_CONFIG.bytes)}`, size: EMPTY_CONFIG.bytes.length };
  return {
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    artifactType: 'application/vnd.tern.volume.v1',
    config,
    layers: [...chunks].map(([hex, size]) => ({ mediaType: 'application/vnd.tern.volume.chunk.v1', digest: `sha256:${hex}`, size })),
    annotations: { 'dev.tern.volume.version': String(version) },
  };
}

/** The tag of a volume version's manifest. */
export function volumeVersionTag(version: number): string {
  return `v${version}`;
}

function blobUrl(g: BlobGrant, hex: string): string {
  return `${g.url}/v2/${g.repository}/blobs/sha256:${hex}`;
}

/** The repository of a volume's chunks: one per volume under its workspace's namespace. */
export function volumeRepository(workspaceId: string, volumeId: string): string {
  return `volumes/${workspaceId}/${volumeId}`;
}
