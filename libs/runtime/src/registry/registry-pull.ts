import { mkdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ImageError } from '../errors.js';
import { requireSha256Hex } from '../images/digest.js';
import { prepareOciImage } from '../images/oci-image.js';
import type { PreparedImage } from '../images/prepared-image.js';
import { parseRegistryRef, pinnedRef } from './registry-ref.js';
import { type RegistryAccessList, type SkopeoOptions, skopeoCopy } from './skopeo.js';

export interface RegistryPullOptions extends SkopeoOptions {
  umoci?: string;
}

async function layoutHasTag(layout: string, tag: string): Promise<boolean> {
  const text = await readFile(join(layout, 'index.json'), 'utf8').catch(() => undefined);
  if (!text) return false;
  const index = JSON.parse(text) as { manifests?: { annotations?: Record<string, string> }[] };
  return Boolean(index.manifests?.some((m) => m.annotations?.['org.opencontainers.image.ref.name'] === tag));
}

/**
 * Pulls `registry/repo@sha256:…` into the agent's OCI layout (one layout for every image, so
 * images share the layers they have in common: skopeo skips blobs the layout already holds) and
 * unpacks it once per manifest digest. skopeo checks each blob against its digest as it reads
 * it, and the manifest it wrote must be the digest asked for: anything else is refused.
 */
export async function pullRegistryImage(
  ref: string,
  layout: string,
  dir: string,
  access: RegistryAccessList,
  options: RegistryPullOptions = {},
): Promise<PreparedImage> {
  const parsed = parseRegistryRef(ref);
  if (!parsed.digest) throw new ImageError(ref, 'an agent pulls images by digest only (…@sha256:<digest>)');
  const hex = requireSha256Hex(ref, parsed.digest);
  if (!(await layoutHasTag(layout, hex))) {
    options.onProgress?.(`pulling ${ref}`);
    await mkdir(dirname(layout), { recursive: true });
    const got = await skopeoCopy(ref, `docker://${pinnedRef(parsed, parsed.digest)}`, `oci:${layout}:${hex}`, access, options);
    if (got !== parsed.digest) throw new ImageError(ref, `the registry served manifest ${got}, not ${parsed.digest}`);
    options.onProgress?.(`pulled ${ref}`);
  }
  return prepareOciImage(ref, layout, hex, dir, options.umoci);
}
