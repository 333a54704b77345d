import { BadRequestException, Inject, Injectable } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { ImageError, parseRegistryRef, pinnedRef, type RegistryAccess, resolveRegistryDigest } from '#tern/runtime';

/**
 * Pins a deployment's registry image to the digest its tag names now, so that every container
 * of the version runs the same bytes and agents pull by digest. Asking the registry at deploy
 * time is also where an unreachable registry, a wrong credential or a missing image fails the
 * deploy, with the reference and the registry's answer, instead of a container start later.
 */
@Injectable()
export class ImagePins {
  constructor(@Inject(TERN_CONFIG) private readonly config: TernConfig) {}

  /** The registry users the control plane has: Tern's registry's pull user. */
  private access(): RegistryAccess[] {
    const r = this.config.registry;
    return r ? [{ host: r.host, insecure: r.insecure, ...(r.pull ?? {}) }] : [];
  }

  /** `host` stays `host`; a registry reference becomes `host/repo@sha256:…`. Throws a 400 naming the reference. */
  async pin(image: string): Promise<string> {
    if (image === 'host') return image;
    try {
      const ref = parseRegistryRef(image);
      const digest = await resolveRegistryDigest(image, this.access());
      if (ref.digest && digest !== ref.digest)
        throw new ImageError(image, `the registry holds manifest ${digest} under this reference, not ${ref.digest}`);
      return pinnedRef(ref, digest);
    } catch (e) {
      if (e instanceof ImageError) throw new BadRequestException([`image: ${e.message}`]);
      throw e;
    }
  }
}
