/**
 * What `/endpoint/<name>[@<N>][/<path>][?query]` names. Everything after the name is the
 * server's own path, passed on untouched (an OpenAI-compatible server's `/v1/...` included); a
 * version is pinned by `@<N>` on the name, which no deployment name can contain, or by the
 * `x-tern-version` header.
 */
export interface EndpointTarget {
  name: string;
  version?: number;
  /** Path and query inside the deployment, always starting with `/`. */
  path: string;
}

export const ENDPOINT_PREFIX = '/endpoint/';
/** The request header that pins a version, as `@<N>` on the name does; never forwarded to the container. */
export const VERSION_HEADER = 'x-tern-version';
/** The response header that says which version answered. */
export const SERVED_VERSION_HEADER = 'x-tern-version';
/** The response header that warns about a path that pinned a version before `@<N>` (see pathNotice). */
export const NOTICE_HEADER = 'x-tern-notice';

const VERSION = /^[1-9]\d{0,8}$/;

/** A version as the URL or the header gives it; undefined for none, NaN for one that is not a version number. */
export function parseVersion(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  return VERSION.test(raw) ? Number(raw) : NaN;
}

export function parseEndpointUrl(url: string): EndpointTarget | undefined {
  if (!url.startsWith(ENDPOINT_PREFIX)) return undefined;
  const q = url.indexOf('?');
  const pathname = q >= 0 ? url.slice(0, q) : url;
  const query = q >= 0 ? url.slice(q) : '';
  const slash = pathname.indexOf('/', ENDPOINT_PREFIX.length);
  const first = slash >= 0 ? pathname.slice(ENDPOINT_PREFIX.length, slash) : pathname.slice(ENDPOINT_PREFIX.length);
  const rest = slash >= 0 ? pathname.slice(slash) : '/';
  let decoded: string;
  try {
    decoded = decodeURIComponent(first);
  } catch {
    return undefined;
  }
  const at = decoded.lastIndexOf('@');
  const name = at >= 0 ? decoded.slice(0, at) : decoded;
  if (!name) return undefined;
  const version = at >= 0 ? parseVersion(decoded.slice(at + 1)) : undefined;
  return { name, version: at >= 0 ? (version ?? NaN) : undefined, path: `${rest}${query}` };
}

/**
 * Until `@<N>` existed a leading `/v<N>` segment pinned version N; it is the server's path now
 * (`baseURL …/endpoint/llm/v1` is the OpenAI client's). Where that changed the answer (version N
 * exists and another one answered), the response says so, and how a pin is written today.
 */
export function pathNotice(name: string, path: string, served: number, exists: (version: number) => boolean): string | undefined {
  const m = /^\/v([1-9]\d{0,8})(?:[/?]|$)/.exec(path);
  if (!m || Number(m[1]) === served || !exists(Number(m[1]))) return undefined;
  return `"/v${m[1]}" was passed to the server as part of its path and version ${served} answered; pin version ${m[1]} with /endpoint/${name}@${m[1]}/... or the ${VERSION_HEADER} header`;
}

/** The version a request pins, by `@<N>` or the header (both: they must agree); a problem to answer 400 with otherwise. */
export function pinnedVersion(
  target: EndpointTarget,
  header: string | string[] | undefined,
): { version: number | undefined } | { problem: string } {
  const form = `pin a version as /endpoint/${target.name}@<N>/… or with ${VERSION_HEADER}: <N>, N a whole number from 1`;
  if (Array.isArray(header)) return { problem: `${VERSION_HEADER} is given ${header.length} times: give it once (${form})` };
  const fromHeader = parseVersion(header?.trim());
  if (Number.isNaN(target.version) || Number.isNaN(fromHeader)) return { problem: `not a version: ${form}` };
  if (target.version !== undefined && fromHeader !== undefined && target.version !== fromHeader)
    return { problem: `the URL pins version ${target.version} and ${VERSION_HEADER} says ${fromHeader}: give one` };
  return { version: target.version ?? fromHeader };
}
