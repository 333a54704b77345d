import type { RegistryAccessList } from '#tern/runtime';
import { SITE_CACHE_STORE_PATH } from '#tern/volumes';

/**
 * Which registry the machine's site cache (`siteCache`) fronts, asked of the cache itself (`GET
 * /site-cache/store`) until it answers: image pulls from that registry read their blobs through
 * the cache, as volume mounts do; pulls from any other registry go to it directly.
 */
export class SiteCacheFront {
  private store?: Promise<string | undefined>;

  constructor(
    private readonly url: string | undefined,
    private readonly warn: (message: string) => void,
  ) {}

  /** `registries` with the site cache on the entry of the registry it fronts. */
  async through(registries: RegistryAccessList): Promise<RegistryAccessList> {
    const host = await this.storeHost();
    if (!host || !this.url) return registries;
    const siteCache = { url: this.url, unreachable: this.warn };
    return registries.map((access) => (access.host === host ? { ...access, siteCache } : access));
  }

  /** The fronted registry's host[:port], as image references name it; undefined while the cache cannot say. */
  private storeHost(): Promise<string | undefined> {
    if (!this.url) return Promise.resolve(undefined);
    this.store ??= this.ask().catch((e: Error) => {
      this.store = undefined; // asked again at the next pull
      this.warn(`the site cache ${this.url} cannot say which registry it fronts (${e.message}); images come from their registry directly`);
      return undefined;
    });
    return this.store;
  }

  private async ask(): Promise<string> {
    const res = await fetch(`${this.url}${SITE_CACHE_STORE_PATH}`, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`it answered ${res.status} to GET ${SITE_CACHE_STORE_PATH}`);
    const { store } = (await res.json()) as { store?: unknown };
    if (typeof store !== 'string' || !/^https?:\/\/[^/\s]+$/.test(store)) throw new Error(`it named no registry: ${JSON.stringify(store)}`);
    return new URL(store).host;
  }
}
