import { join } from 'node:path';
import { startSiteCache } from '#tern/volumes';
import { AgentConfigError } from './settings/config-file.js';

export interface SiteCacheCommand {
  store: string;
  listen: string;
  dir: string;
  maxGb: string;
}

/**
 * `tern-agent site-cache`: the read-through cache of a site's volume chunks and image layers (libs/volumes
 * site-cache.ts), run on one machine of the site; the others name it in `siteCache`. Runs until
 * SIGINT or SIGTERM.
 */
export async function runSiteCache(opts: SiteCacheCommand): Promise<void> {
  const problems: string[] = [];
  const store = opts.store.replace(/\/+$/, '');
  if (!/^https?:\/\/[^/\s]+$/.test(store)) problems.push(`--store must be the registry's http(s)://host[:port], not "${opts.store}"`);
  const listen = /^(.+):(\d{1,5})$/.exec(opts.listen);
  if (!listen || Number(listen[2]) > 65535) problems.push(`--listen must be host:port, not "${opts.listen}"`);
  const maxGb = Number(opts.maxGb);
  if (!(maxGb > 0)) problems.push(`--max-gb must be a positive number, not "${opts.maxGb}"`);
  if (problems.length) throw new AgentConfigError(problems);
  const host = listen![1]!.replace(/^\[(.*)\]$/, '$1');
  const cache = await startSiteCache(
    {
      upstream: store,
      dir: opts.dir,
      maxBytes: Math.round(maxGb * 1e9),
      // Its machines only see their transfer cut: the operator reads why here.
      failed: (message) => process.stderr.write(`site cache: ${message}\n`),
    },
    Number(listen![2]),
    host,
  );
  process.stdout.write(
    `site cache of ${store} listening on ${cache.url} (blobs in ${opts.dir}, at most ${maxGb} GB)\n` +
      `machines of this site read through it with: tern-agent config set siteCache http://<this machine>:${listen![2]}\n`,
  );
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
  });
  await cache.close();
  const s = cache.cache.stats;
  process.stdout.write(
    `site cache stopped: ${s.upstreamBytes} bytes from the store, ${s.servedBytes} served, ${s.hits} hits, ${s.misses} misses\n`,
  );
}

export function defaultSiteCacheDir(stateDir: string): string {
  return join(stateDir, 'site-cache');
}
