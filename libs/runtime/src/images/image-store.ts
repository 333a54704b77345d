import { dirname, join } from 'node:path';
import { type HostImageOptions, prepareHostImage } from './host-image.js';
import { evictImages, touchImage } from './image-cache.js';
import { HOST_IMAGE, parseImageRef } from './image-ref.js';
import { prepareOciImage } from './oci-image.js';
import type { PreparedImage } from './prepared-image.js';
import { pullRegistryImage } from '../registry/registry-pull.js';
import type { RegistryAccessList } from '../registry/skopeo.js';

export interface ImageStoreOptions {
  /** Cache root: `host/<recipe hash>/rootfs`, `oci/sha256-<manifest hex>/rootfs`. */
  root: string;
  umoci?: string;
  host?: HostImageOptions;
  /**
   * Registries this machine pulls from (pull credentials); others are reached anonymously. A
   * function is asked at each pull, for credentials that change while the agent runs.
   */
  registries?: RegistryAccessList | (() => RegistryAccessList | Promise<RegistryAccessList>);
  /** Pull progress (`Copying blob sha256:… done`), for the container's logs and the dashboard. */
  onPullProgress?: (ref: string, line: string) => void;
  /**
   * Most bytes the unpacked registry images may take: past it, the least recently used ones not
   * in use are removed after a pull. Absent: no limit.
   */
  maxBytes?: number;
  /** The digests of the images containers use now (never evicted). */
  inUse?: () => Promise<Iterable<string>>;
  /** Called with each digest evicted. */
  onEvict?: (digest: string) => void;
}

/**
 * Prepares images on the agent, cached by content hash. A rootfs is shared, read-only, by every
 * container of that image; runc only adds empty mount points to it.
 */
export class ImageStore {
  private readonly inFlight = new Map<string, Promise<PreparedImage>>();
  private host?: Promise<PreparedImage>;
  /** One pull at a time: each has the machine's bandwidth and cores, and eviction sees a settled cache. */
  private pulls: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: ImageStoreOptions) {}

  get root(): string {
    return this.options.root;
  }

  resolve(ref: string): Promise<PreparedImage> {
    if (ref !== HOST_IMAGE && !ref.startsWith('oci:')) return this.once(ref, () => this.pull(ref));
    const parsed = parseImageRef(ref);
    if (parsed.kind === 'host') {
      // The recipe reads only the host's layout, which does not change under a running agent.
      this.host ??= prepareHostImage(join(this.options.root, 'host'), this.options.host).catch((e: unknown) => {
        this.host = undefined;
        throw e;
      });
      return this.host;
    }
    return this.once(`${parsed.layout}:${parsed.tag}`, () =>
      prepareOciImage(ref, parsed.layout, parsed.tag, join(this.options.root, 'oci'), this.options.umoci),
    );
  }

  /** One preparation per key at a time; callers asking meanwhile share it. */
  private once(key: string, prepare: () => Promise<PreparedImage>): Promise<PreparedImage> {
    let p = this.inFlight.get(key);
    if (!p) {
      p = prepare().finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, p);
    }
    return p;
  }

  /**
   * A registry image by digest, streamed and unpacked under `<root>/oci`. `<root>/layout` is where
   * earlier agents kept the blobs (skopeo's OCI layout): eviction still clears it.
   */
  private pull(ref: string): Promise<PreparedImage> {
    const { onPullProgress, registries = [], umoci, maxBytes, inUse, onEvict } = this.options;
    const layout = join(this.options.root, 'layout');
    const ociDir = join(this.options.root, 'oci');
    const p = this.pulls.then(async () => {
      const access = typeof registries === 'function' ? await registries() : registries;
      const image = await pullRegistryImage(ref, ociDir, access, {
        ...(onPullProgress ? { onProgress: (line: string) => onPullProgress(ref, line) } : {}),
      });
      await touchImage(dirname(image.rootfs));
      if (maxBytes !== undefined) {
        const keep = new Set([image.digest]);
        for (const used of (await inUse?.()) ?? []) keep.add(used);
        for (const digest of await evictImages(ociDir, layout, maxBytes, keep, umoci)) onEvict?.(digest);
      }
      return image;
    });
    this.pulls = p.catch(() => undefined);
    return p;
  }
}
