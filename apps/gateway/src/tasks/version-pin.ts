import { ApiError } from '#tern/service';
/** The N of a `v<N>` path segment; 404 naming the routes `expected` lists otherwise. */
export function versionPin(segment: string, expected: string): number {
  const pin = /^v(\d{1,9})$/.exec(segment);
  if (!pin) throw new ApiError(404, `expected ${expected}, got "${segment}"`);
  return Number(pin[1]);
}
