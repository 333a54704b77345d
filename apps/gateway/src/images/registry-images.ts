import { Inject, Injectable, ServiceUnavailableException } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { RegistryTokens } from '../registry-tokens/registry-tokens.service.js';

/** Every kind of manifest an image or an index may be stored as: a HEAD must accept all to find the digest. */
const MANIFEST_TYPES = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
].join(', ');

/**
 * The control plane's deletes in Tern's own registry (the distribution API, which must run with
 * `storage.delete.enabled`): a manifest by tag or digest, or every repository under a prefix
 * (a deleted workspace's builds). Under token auth the gateway signs itself a token for exactly
 * what it does; with static users it uses the push user. The blobs go at the registry's next
 * garbage collection, as with volumes.
 */
@Injectable()
export class RegistryImages {
  constructor(
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
    private readonly tokens: RegistryTokens,
  ) {}

  /** Whether this installation has a registry of its own. */
  get enabled(): boolean {
    return this.config.registry !== undefined;
  }

  /** `host[:port]` of Tern's registry, as image references name it. */
  get host(): string | undefined {
    return this.config.registry?.host;
  }

  /** The digest of the manifest `reference` (a tag or a digest) names in `repository`; undefined when none. */
  async digestOf(repository: string, reference: string): Promise<string | undefined> {
    const head = await this.call(`${this.base()}/v2/${repository}/manifests/${reference}`, {
      method: 'HEAD',
      headers: { ...this.authorization({ repository, actions: ['pull'] }), accept: MANIFEST_TYPES },
    });
    if (head.status === 404) return undefined;
    const digest = head.headers.get('docker-content-digest');
    if (!head.ok || !digest) throw this.refusal(head.status, `manifest ${repository}:${reference}`);
    return digest;
  }

  /** Deletes the manifest `digest` in `repository`, and so every tag naming it; false when there was none. */
  async deleteManifest(repository: string, digest: string): Promise<boolean> {
    const res = await this.call(`${this.base()}/v2/${repository}/manifests/${digest}`, {
      method: 'DELETE',
      headers: this.authorization({ repository, actions: ['pull', 'delete'] }),
    });
    if (res.status === 404) return false;
    if (res.status !== 202) throw this.refusal(res.status, `the deletion of ${repository}@${digest}`);
    return true;
  }

  /** Deletes every manifest of every repository whose name starts with `prefix`; answers how many. */
  async deleteRepositoriesUnder(prefix: string): Promise<number> {
    let deleted = 0;
    for (const repository of await this.repositoriesUnder(prefix))
      for (const tag of await this.tags(repository)) {
        // Two tags of one manifest: the first deletion took both, the second finds none.
        const digest = await this.digestOf(repository, tag);
        if (digest && (await this.deleteManifest(repository, digest))) deleted++;
      }
    return deleted;
  }

  /** The repositories whose names start with `prefix`, from the registry's catalog (paged). */
  private async repositoriesUnder(prefix: string): Promise<string[]> {
    const token = this.tokens.catalogToken();
    const auth = token ? { authorization: `Bearer ${token}` } : this.staticUser();
    const found: string[] = [];
    let last = '';
    for (;;) {
      const res = await this.call(`${this.base()}/v2/_catalog?n=1000${last ? `&last=${encodeURIComponent(last)}` : ''}`, {
        headers: auth,
      });
      if (!res.ok) throw this.refusal(res.status, 'its catalog');
      const page = ((await res.json()) as { repositories?: string[] | null }).repositories ?? [];
      found.push(...page.filter((r) => r.startsWith(prefix)));
      if (page.length < 1000 || !res.headers.get('link')) return found;
      last = page[page.length - 1]!;
    }
  }

  private async tags(repository: string): Promise<string[]> {
    const res = await this.call(`${this.base()}/v2/${repository}/tags/list?n=10000`, {
      headers: this.authorization({ repository, actions: ['pull'] }),
    });
    if (res.status === 404) return [];
    if (!res.ok) throw this.refusal(res.status, `the tags of ${repository}`);
    return ((await res.json()) as { tags?: string[] | null }).tags ?? [];
  }

  private authorization(grant: { repository: string; actions: ('pull' | 'delete')[] }): Record<string, string> {
    const token = this.tokens.controlPlaneToken([grant]);
    return token ? { authorization: `Bearer ${token}` } : this.staticUser();
  }

  private staticUser(): Record<string, string> {
    const user = this.config.registry?.push;
    return user ? { authorization: `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}` } : {};
  }

  private base(): string {
    const r = this.config.registry;
    if (!r) throw new ServiceUnavailableException('this installation has no registry of its own (REGISTRY_URL)');
    return r.url;
  }

  private async call(url: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
    } catch (e) {
      const err = e as Error & { cause?: { code?: string } };
      throw new ServiceUnavailableException(`cannot reach the registry ${this.config.registry?.host}: ${err.cause?.code ?? err.message}`);
    }
  }

  private refusal(status: number, what: string): ServiceUnavailableException {
    return new ServiceUnavailableException(`the registry ${this.config.registry?.host} answered ${status} for ${what}`);
  }
}
