import { join } from 'node:path';
import { type HostImageOptions, prepareHostImage } from './host-image.js';
import { parseImageRef } from './image-ref.js';
import { prepareOciImage } from './oci-image.js';
import type { PreparedImage } from './prepared-image.js';

export interface ImageStoreOptions {
  /** Cache root: `host/<recipe hash>/rootfs`, `oci/sha256-<manifest hex>/rootfs`. */
  root: string;
  umoci?: string;
  host?: HostImageOptions;
}

/**
 * Prepares images on the agent, cached by content hash. A rootfs is shared, read-only, by every
 * container of that image; runc only adds empty mount points to it.
 */
export class ImageStore {
  private readonly inFlight = new Map<string, Promise<PreparedImage>>();
  private host?: Promise<PreparedImage>;

  constructor(private readonly options: ImageStoreOptions) {}

  get root(): string {
    return this.options.root;
  }

  resolve(ref: string): Promise<PreparedImage> {
    const parsed = parseImageRef(ref);
    if (parsed.kind === 'host') {
      // The recipe reads only the host's layout, which does not change under a running agent.
      this.host ??= prepareHostImage(join(this.options.root, 'host'), this.options.host).catch((e: unknown) => {
        this.host = undefined;
        throw e;
      });
      return this.host;
    }
    const key = `${parsed.layout}:${parsed.tag}`;
    let p = this.inFlight.get(key);
    if (!p) {
      p = prepareOciImage(ref, parsed.layout, parsed.tag, join(this.options.root, 'oci'), this.options.umoci).finally(() =>
        this.inFlight.delete(key),
      );
      this.inFlight.set(key, p);
    }
    return p;
  }
}
