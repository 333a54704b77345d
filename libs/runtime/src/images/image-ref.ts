import { isAbsolute, resolve } from 'node:path';
import { ImageError } from '../errors.js';

export type ParsedImageRef = { kind: 'host' } | { kind: 'oci'; layout: string; tag: string };

export const HOST_IMAGE = 'host';

/**
 * `host`, or `oci:<path to an OCI image layout>[:<tag>]` (tag `latest` when absent; a
 * relative path is taken from the current directory). Registry references are not pulled
 * here: building and fetching images is a later step that produces an OCI layout.
 */
export function parseImageRef(ref: string, cwd: string = process.cwd()): ParsedImageRef {
  if (ref === HOST_IMAGE) return { kind: 'host' };
  if (!ref.startsWith('oci:')) {
    throw new ImageError(ref, 'unsupported reference: use "host" or "oci:<layout path>[:<tag>]"');
  }
  const rest = ref.slice('oci:'.length);
  const colon = rest.lastIndexOf(':');
  // A colon followed by a '/' belongs to the path, not a tag.
  const hasTag = colon >= 0 && !rest.slice(colon + 1).includes('/');
  const path = hasTag ? rest.slice(0, colon) : rest;
  const tag = hasTag ? rest.slice(colon + 1) : 'latest';
  if (!path) throw new ImageError(ref, 'missing layout path');
  if (!/^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/.test(tag)) throw new ImageError(ref, `invalid tag "${tag}"`);
  return { kind: 'oci', layout: isAbsolute(path) ? path : resolve(cwd, path), tag };
}
