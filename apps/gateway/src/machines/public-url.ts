type Headers = Record<string, string | string[] | undefined>;

const HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;
const PREFIX = /^(\/[A-Za-z0-9._~-]+)+$/;

function first(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v?.split(',')[0]?.trim() || undefined;
}

/** `Forwarded: for=1.2.3.4;proto=https;host=tern.example.com` (RFC 7239), first hop only. */
function forwarded(header: string | undefined): { proto?: string; host?: string } {
  const out: { proto?: string; host?: string } = {};
  for (const pair of (header ?? '').split(';')) {
    const [k, v] = pair.split('=').map((s) => s?.trim());
    if (!k || !v) continue;
    const value = v.replace(/^"|"$/g, '');
    if (k.toLowerCase() === 'proto') out.proto = value;
    if (k.toLowerCase() === 'host') out.host = value;
  }
  return out;
}

/**
 * The gateway's URL as the caller reached it, for the `tern-agent init` line: the proxy
 * headers (Forwarded, X-Forwarded-Proto/Host/Prefix) when a proxy sits in front, else Host.
 * The result is pasted into a shell, so anything outside a plain scheme, host and path falls
 * back to a safe default rather than passing through.
 */
export function publicGatewayUrl(headers: Headers, fallbackHost = 'localhost:1994'): string {
  const fwd = forwarded(first(headers.forwarded));
  const proto = (fwd.proto ?? first(headers['x-forwarded-proto']) ?? 'http').toLowerCase();
  const host = fwd.host ?? first(headers['x-forwarded-host']) ?? first(headers.host);
  const prefix = first(headers['x-forwarded-prefix'])?.replace(/\/+$/, '');
  return [
    proto === 'https' ? 'https' : 'http',
    '://',
    host && HOST.test(host) ? host : fallbackHost,
    prefix && PREFIX.test(prefix) ? prefix : '',
  ].join('');
}
