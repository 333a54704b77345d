/** What `/endpoint/<name>[/v<N>][/<path>][?query]` names: a leading `v<N>` segment pins a version. */
export interface EndpointTarget {
  name: string;
  version?: number;
  /** Path and query inside the deployment, always starting with `/`. */
  path: string;
}

export const ENDPOINT_PREFIX = '/endpoint/';

export function parseEndpointUrl(url: string): EndpointTarget | undefined {
  if (!url.startsWith(ENDPOINT_PREFIX)) return undefined;
  const q = url.indexOf('?');
  const pathname = q >= 0 ? url.slice(0, q) : url;
  const query = q >= 0 ? url.slice(q) : '';
  const [rawName, ...rest] = pathname.slice(ENDPOINT_PREFIX.length).split('/');
  let name: string;
  try {
    name = decodeURIComponent(rawName);
  } catch {
    return undefined;
  }
  if (!name) return undefined;
  let version: number | undefined;
  const pin = /^v(\d{1,9})$/.exec(rest[0] ?? '');
  if (pin) {
    version = Number(pin[1]);
    rest.shift();
  }
  return { name, version, path: `/${rest.join('/')}${query}` };
}
