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
  // Called twice a request: no Set or token list built unless a Connection header names some.
  const connection = headers.connection ?? headers.Connection;
  const named = connection
    ? String(connection)
        .split(',')
        .map((t) => t.trim().toLowerCase())
        .filter(Boolean)
    : undefined;
  const out: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    const key = name.toLowerCase();
    if (HOP_BY_HOP.has(key) || drop.includes(key) || named?.includes(key)) continue;
    out[key] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}
