/** RFC 9110 §7.6.1 connection-specific headers: meaningful for one hop only, never forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Headers as they travel on: lower-case, hop-by-hop ones (and those the Connection header
 * names) dropped, repeated values joined, plus whatever `drop` lists (Tern's own credentials,
 * a length the next hop recomputes).
 */
export function forwardable(headers: Record<string, string | string[] | undefined>, drop: readonly string[] = []): Record<string, string> {
  const named = String(headers.connection ?? headers.Connection ?? '')
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
  const skip = new Set([...HOP_BY_HOP, ...named, ...drop]);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const key = name.toLowerCase();
    if (value === undefined || skip.has(key)) continue;
    out[key] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}
