import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSiteCache } from '#tern/volumes';
import { SiteCacheFront } from './site-cache-front.js';

describe('SiteCacheFront', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tern-site-front-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const registries = [
    { host: 'registry.example:5000', username: 'm-1', password: 't' },
    { host: 'elsewhere.example', insecure: true },
  ];

  it('puts the site cache on the registry it says it fronts, and on no other', async () => {
    const cache = await startSiteCache({ upstream: 'http://registry.example:5000', dir, maxBytes: 1 << 20 }, 0, '127.0.0.1');
    try {
      const warned: string[] = [];
      const front = new SiteCacheFront(cache.url, (m) => warned.push(m));
      const [tern, other] = await front.through(registries);
      expect(tern).toMatchObject({ ...registries[0], siteCache: { url: cache.url } });
      expect(other).toEqual(registries[1]);
      expect(warned).toEqual([]);
    } finally {
      cache.server.closeAllConnections();
      await cache.close();
    }
  });

  it('leaves every registry direct while the cache cannot say what it fronts, and asks again at the next pull', async () => {
    let answer = 404;
    const server = createServer((req, res) => {
      res.writeHead(answer, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer === 200 ? { store: 'https://registry.example:5000' } : { error: 'no' }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const warned: string[] = [];
      const front = new SiteCacheFront(url, (m) => warned.push(m));
      expect(await front.through(registries)).toEqual(registries);
      expect(warned).toEqual([
        `the site cache ${url} cannot say which registry it fronts (it answered 404 to GET /site-cache/store); images come from their registry directly`,
      ]);
      answer = 200;
      expect((await front.through(registries))[0]).toMatchObject({ siteCache: { url } });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('changes nothing without a site cache', async () => {
    expect(await new SiteCacheFront(undefined, () => undefined).through(registries)).toEqual(registries);
  });
});
