import { type RegistryAccess } from '#tern/runtime';

/**
 * GET a registry API path (`/v2/_catalog`, `/v2/<repo>/tags/list`) the way registry clients do:
 * with Basic credentials, and when the registry answers with a Bearer challenge (token auth,
 * as `npm run up`'s registry does), with a token from the realm it names for the scope it asks.
 */
export async function registryGet<T>(access: RegistryAccess & { url: string }, path: string): Promise<T> {
  const basic = access.username
    ? { authorization: `Basic ${Buffer.from(`${access.username}:${access.password ?? ''}`).toString('base64')}` }
    : undefined;
  const url = `${access.url.replace(/\/+$/, '')}${path}`;
  let res = await reach(url, basic ?? {}, access.url);
  const challenge = res.headers.get('www-authenticate');
  if (res.status === 401 && challenge && /^Bearer\s/i.test(challenge)) {
    const token = await tokenFor(challenge, basic);
    res = await reach(url, { authorization: `Bearer ${token}` }, access.url);
  }
  if (!res.ok)
    throw new Error(`${res.status} from the registry for ${path}${res.status === 401 ? ' (are you logged in as an operator?)' : ''}`);
  return (await res.json()) as T;
}

async function reach(url: string, headers: Record<string, string>, what: string): Promise<Response> {
  return fetch(url, { headers }).catch((e: Error) => {
    throw new Error(`cannot reach ${what} (${String(e.cause ?? e.message)})`);
  });
}

/** `Bearer realm="…",service="…",scope="…"` → a token from the realm, asked with our credentials. */
async function tokenFor(challenge: string, basic: Record<string, string> | undefined): Promise<string> {
  const params = Object.fromEntries([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
  if (!params.realm) throw new Error(`the registry asked for a token without saying where to get one: ${challenge}`);
  const realm = new URL(params.realm);
  if (params.service) realm.searchParams.set('service', params.service);
  if (params.scope) realm.searchParams.set('scope', params.scope);
  const res = await reach(realm.href, basic ?? {}, `the registry's token service at ${realm.origin}`);
  const body = (await res.json().catch(() => ({}))) as { token?: string; access_token?: string; message?: string | string[] };
  const token = body.token ?? body.access_token;
  if (!res.ok || !token) throw new Error(`the registry's token service refused: ${res.status} ${[body.message ?? ''].flat().join('; ')}`);
  return token;
}
