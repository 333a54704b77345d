import { ImageError } from '../errors.js';

/**
 * The one digest form Tern builds paths from: `sha256:` and 64 lower-case hex digits. Anything
 * else (another algorithm, upper case, a short or long hex, `../` in either field) is refused
 * before a path is joined from it.
 */
const SHA256_DIGEST = /^sha256:([0-9a-f]{64})$/;

/** The hex of a `sha256:<64 hex>` digest, or undefined when it is not exactly that. */
export function sha256Hex(digest: unknown): string | undefined {
  return typeof digest === 'string' ? SHA256_DIGEST.exec(digest)?.[1] : undefined;
}

/** The hex of a digest found in an image's metadata; an ImageError naming the image otherwise. */
export function requireSha256Hex(ref: string, digest: unknown): string {
  const hex = sha256Hex(digest);
  if (!hex)
    throw new ImageError(
      ref,
      `digest ${JSON.stringify(digest)} is not sha256:<64 lower-case hex digits>; refusing to build a path from it`,
    );
  return hex;
}
