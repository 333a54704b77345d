import { createHash, createPrivateKey, randomBytes, randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { VOLUME_CHUNK_BYTES, type VolumeManifest } from '#tern/contracts';
import { freePort, pullRegistryImage } from '#tern/runtime';
import { inParallel, RegistryBlobs, startSiteCache, volumeRepository } from '#tern/volumes';
import { signRegistryToken } from '../../apps/gateway/src/registry-tokens/registry-token.js';
import { prepareRegistry, TOKEN_ISSUER, TOKEN_SERVICE } from '../../scripts/lib/registry.mjs';
import { addLinkedNamespace, removeLinkedNamespace } from '../support/netns.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';

const MiB = 2 ** 20;
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/**
 * A site cache (`tern-agent site-cache`) in front of the registry: what it serves is what
 * the store would give the requester's token, nothing else; its bytes are the store's, checked by
 * digest; and a site's machines mounting one volume at once pull it across the site's uplink
 * once. The registry is the one `npm run up` runs (token auth), the cache the agent's own command,
 * each machine the agent's mount code in the site's network namespace.
 */
(await describeNeeding(['root', 'docker-registry', 'openssl', 'ip']))('site caches of volume chunks and image blobs', () => {
  let work: string;
  let registry: ResultPromise;
  let port: number;
  let key: ReturnType<typeof createPrivateKey>;
  const local = () => `http://127.0.0.1:${port}`;
  const repoA = volumeRepository('5a5a5a5a-0000-4000-8000-00000000005a', '6a6a6a6a-0000-4000-8000-00000000006a');
  const repoB = volumeRepository('5b5b5b5b-0000-4000-8000-00000000005b', '6b6b6b6b-0000-4000-8000-00000000006b');
  const token = (repository: string, actions = ['pull']) =>
    signRegistryToken({ key, issuer: TOKEN_ISSUER, service: TOKEN_SERVICE, ttlSeconds: 600 }, 'machine:test', [
      { type: 'repository', name: repository, actions },
    ]).token;
  const store = (repository: string) =>
    new RegistryBlobs(async () => ({ url: local(), repository, token: token(repository, ['pull', 'push']) }));
  const blobFile = (hex: string) =>
    join(work, 'registry', 'storage', 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data');

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tern-site-cache-'));
    port = await freePort();
    // On every address: the sites' namespaces reach it on their uplinks' root side.
    const prepared = prepareRegistry(join(work, 'registry'), {
      host: '0.0.0.0',
      port,
      token: { realm: 'http://127.0.0.1:9/api/v1/registry/token', service: TOKEN_SERVICE, issuer: TOKEN_ISSUER },
    });
    registry = execa('docker-registry', ['serve', prepared.config], { reject: false, all: true });
    await waitFor('the registry to answer', async () => (await fetch(`${local()}/v2/`).catch(() => undefined))?.status === 401, 30_000);
    key = createPrivateKey(await readFile(prepared.keyFile!));
  }, 60_000);

  afterAll(async () => {
    registry?.kill('SIGTERM');
    await registry;
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("serves a blob only to a token the store accepts for its repository, from one download, and the store's bytes only", async () => {
    const chunk = randomBytes(3 * MiB);
    const hex = sha256(chunk);
    await store(repoA).put(hex, chunk);
    const failed: string[] = [];
    const cache = await startSiteCache(
      { upstream: local(), dir: join(work, 'cache-1'), maxBytes: 64 * MiB, failed: (message) => failed.push(message) },
      0,
      '127.0.0.1',
    );
    try {
      const path = (repository: string) => `${cache.url}/v2/${repository}/blobs/sha256:${hex}`;
      const get = (repository: string, bearer?: string) =>
        fetch(path(repository), { headers: bearer ? { authorization: `Bearer ${bearer}` } : {} });

      // Six machines at once: one download.
      const answers = await Promise.all(Array.from({ length: 6 }, () => get(repoA, token(repoA))));
      for (const res of answers) expect(sha256(new Uint8Array(await res.arrayBuffer()))).toBe(hex);
      expect(cache.cache.stats).toMatchObject({ upstreamBytes: chunk.length, servedBytes: 6 * chunk.length });

      // Cached now, and still refused without a token, with another volume's token, and for a
      // repository that does not hold it: what the store said, passed on.
      expect((await get(repoA)).status).toBe(401);
      expect((await get(repoA, token(repoB))).status).toBe(401);
      const elsewhere = await get(repoB, token(repoB));
      expect(elsewhere.status).toBe(404);
      expect(await elsewhere.text()).toContain(`answered 404 for blob ${hex}`);
      expect(cache.cache.stats.servedBytes).toBe(6 * chunk.length);
      // Pushes go to the store itself.
      expect((await fetch(`${cache.url}/v2/${repoA}/blobs/uploads/`, { method: 'POST' })).status).toBe(404);

      // A blob whose bytes changed in the store is refused by its digest and never kept: its bytes
      // were on their way as they arrived, so the machine's transfer is cut before its last byte.
      const other = randomBytes(MiB);
      const otherHex = sha256(other);
      await store(repoA).put(otherHex, other);
      const file = await open(blobFile(otherHex), 'r+');
      await file.write(Buffer.from([other[100]! ^ 0xff]), 0, 1, 100);
      await file.close();
      const refused = await fetch(path(repoA).replace(hex, otherHex), { headers: { authorization: `Bearer ${token(repoA)}` } });
      expect(refused.headers.get('content-length')).toBe(String(other.length));
      await expect(refused.arrayBuffer()).rejects.toThrow();
      await waitFor('the cache to say why', async () => failed.length > 0, 5_000);
      expect(failed).toEqual([expect.stringMatching(new RegExp(`sent blob ${otherHex} hashing to [0-9a-f]{64}; refused$`))]);
      expect(cache.cache.stats.keptBytes).toBe(chunk.length);
    } finally {
      await cache.close();
    }
  }, 60_000);

  it('reads from the store itself when the site cache cannot be reached, and says so', async () => {
    const chunk = randomBytes(MiB);
    const hex = sha256(chunk);
    await store(repoA).put(hex, chunk);
    const heard: string[] = [];
    const dead = `http://127.0.0.1:${await freePort()}`;
    const blobs = new RegistryBlobs(async () => ({ url: local(), repository: repoA, token: token(repoA) }), 30_000, {
      url: dead,
      unreachable: (message) => heard.push(message),
    });
    expect(sha256(await blobs.read(hex, VOLUME_CHUNK_BYTES))).toBe(hex);
    expect(heard).toEqual([`the site cache ${dead} cannot be reached (ECONNREFUSED); reading from the volume store ${local()}`]);
  });

  it('pulls an image from the registry itself when the site cache cannot be reached, and says so', async () => {
    const image = await pushImage(1);
    const heard: string[] = [];
    const dead = `http://127.0.0.1:${await freePort()}`;
    const host = `127.0.0.1:${port}`;
    const pulled = await pullRegistryImage(`${host}/${image.repository}@${image.digest}`, join(work, 'fallback-pull'), [
      { host, insecure: true, token: token(image.repository), siteCache: { url: dead, unreachable: (message) => heard.push(message) } },
    ]);
    expect(sha256(readFileSync(join(pulled.rootfs, 'opt', 'lib.so')))).toBe(image.fileSha256);
    // The config and the layer, each.
    expect(heard).toEqual(
      Array(2).fill(`the site cache ${dead} cannot be reached (connection refused (ECONNREFUSED)); pulling from the registry ${host}`),
    );
  });

  it("crosses each site's shaped uplink about once when the site's three machines mount one volume at once", async () => {
    const volume = await pushVolume(256);
    // Two /30s side by side in 198.18.0.0/15 (benchmarking addresses no real host uses).
    const octet = randomInt(1, 125) * 2;
    const sites = [await Site.start('a', port, octet), await Site.start('b', port, octet + 1)];
    try {
      // One copy over one uplink, straight from the store: the time to beat.
      const alone = await sites[0]!.mount(volume, 'alone', false);
      const aloneBytes = sites[0]!.downloaded();
      expect(aloneBytes).toBeGreaterThan(volume.bytes);

      for (const site of sites) await site.startCache();
      // When each uplink has carried one copy, sampled as it happens: the floor of this run,
      // under whatever load the machine has.
      const began = Date.now();
      const copied = sites.map((site) => site.whenDownloaded(volume.bytes + (site === sites[0] ? aloneBytes : 0), began));
      const mounts = await Promise.all(sites.flatMap((site) => [1, 2, 3].map((i) => site.mount(volume, `m${i}`, true))));
      const all = Date.now() - began;
      const copyMs = Math.max(...(await Promise.all(copied)));
      const crossed = sites.map((site) => site.downloaded() - (site === sites[0] ? aloneBytes : 0));
      process.stdout.write(
        `site caches: one copy over one 200 Mbit/s uplink alone ${alone.ms} ms, during the run ${copyMs} ms; ` +
          `six machines of two sites mounted in ${all} ms (${(all / copyMs).toFixed(2)}x the copy, ${(all / alone.ms).toFixed(2)}x alone); ` +
          `bytes over each uplink ${crossed.map((b) => (b / volume.bytes).toFixed(2)).join(', ')}x the volume\n`,
      );
      for (const m of mounts) expect(m.fellBack).toEqual([]);
      for (const b of crossed) expect(b).toBeLessThanOrEqual(1.2 * volume.bytes);
      expect(all).toBeLessThanOrEqual(1.5 * copyMs);
      for (const site of sites)
        for (const name of ['m1', 'm2', 'm3'])
          expect(sha256(readFileSync(join(site.dir, name, 'tree', 'weights.bin')))).toBe(volume.sha256);
    } finally {
      for (const site of sites) await site.stop();
    }
  }, 240_000);

  it("pulls an image's blobs across the site's uplink once for two machines, through the cache that says which registry it fronts", async () => {
    const image = await pushImage(48);
    const site = await Site.start('i', port, randomInt(1, 125) * 2);
    try {
      await site.startCache();
      const before = site.downloaded();
      const pulls = await Promise.all(['p1', 'p2'].map((machine) => site.pull(image, machine)));
      const crossed = site.downloaded() - before;
      process.stdout.write(
        `site caches: two machines pulled a ${(image.bytes / MiB).toFixed(0)} MiB image in ${pulls.map((p) => p.ms).join(', ')} ms; ` +
          `bytes over the uplink ${(crossed / image.bytes).toFixed(2)}x the image\n`,
      );
      for (const pulled of pulls) {
        expect(pulled).toMatchObject({ throughCache: true, fellBack: [] });
        expect(sha256(readFileSync(join(pulled.rootfs, 'opt', 'lib.so')))).toBe(image.fileSha256);
      }
      expect(crossed).toBeGreaterThanOrEqual(image.bytes);
      expect(crossed).toBeLessThanOrEqual(1.2 * image.bytes);
      // Cached now, and still served only to a token the registry takes for the image's repository.
      const layer = `${site.cacheUrl()}/v2/${image.repository}/blobs/sha256:${image.layerHex}`;
      expect((await fetch(layer, { headers: { authorization: `Bearer ${token(repoA)}` } })).status).toBe(401);
      expect((await fetch(layer, { headers: { authorization: `Bearer ${token(image.repository)}` } })).status).toBe(200);
    } finally {
      await site.stop();
    }
  }, 120_000);

  /**
   * An image of one uncompressed layer holding /opt/lib.so (`mib` MiB of random bytes), pushed to
   * the registry by digest: its repository, manifest digest, blob bytes, layer digest and the file's sha256.
   */
  async function pushImage(mib: number) {
    const repository = 'tern/site-image';
    const src = join(work, 'image-src');
    await mkdir(join(src, 'opt'), { recursive: true });
    const file = randomBytes(mib * MiB);
    await writeFile(join(src, 'opt', 'lib.so'), file);
    await execa('tar', ['-C', src, '-cf', join(work, 'layer.tar'), 'opt']);
    const layer = await readFile(join(work, 'layer.tar'));
    const config = Buffer.from(
      JSON.stringify({ architecture: 'amd64', os: 'linux', config: {}, rootfs: { type: 'layers', diff_ids: [`sha256:${sha256(layer)}`] } }),
    );
    const blobs = store(repository);
    await blobs.put(sha256(layer), layer);
    await blobs.put(sha256(config), config);
    const manifest = {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${sha256(config)}`, size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: `sha256:${sha256(layer)}`, size: layer.length }],
    };
    await blobs.putManifest('site', manifest);
    return {
      repository,
      digest: `sha256:${sha256(Buffer.from(JSON.stringify(manifest)))}`,
      bytes: layer.length + config.length,
      layerHex: sha256(layer),
      fileSha256: sha256(file),
    };
  }

  /** A volume of one file of `mib` MiB, pushed to repoA, and its manifest on disk. */
  async function pushVolume(mib: number): Promise<{ manifestFile: string; bytes: number; sha256: string }> {
    const parts = Array.from({ length: (mib * MiB) / VOLUME_CHUNK_BYTES }, () => randomBytes(VOLUME_CHUNK_BYTES));
    await inParallel(parts, 4, (c) => store(repoA).put(sha256(c), c));
    const all = createHash('sha256');
    for (const part of parts) all.update(part);
    const manifest: VolumeManifest = {
      volume: 'weights',
      version: 1,
      store: 'registry',
      files: [{ path: 'weights.bin', size: mib * MiB, mode: 0o644, mtime: new Date().toISOString(), chunks: parts.map(sha256) }],
    };
    const manifestFile = join(work, 'manifest.json');
    await writeFile(manifestFile, JSON.stringify(manifest));
    return { manifestFile, bytes: mib * MiB, sha256: all.digest('hex') };
  }

  /**
   * A site: a network namespace whose only way out is its uplink to the root namespace (where
   * the store listens), shaped to 200 Mbit/s towards the site; its cache and machines run inside.
   */
  class Site {
    private cache?: ResultPromise;
    private readonly namespace: string;
    private readonly hostVeth: string;
    private readonly near: string;
    private readonly far: string;
    private baseline = 0;
    readonly dir: string;

    private constructor(
      name: string,
      private readonly storePort: number,
      octet: number,
    ) {
      const id = randomBytes(2).toString('hex');
      this.namespace = `tern-site-${name}-${id}`;
      this.hostVeth = `tsc${name}${id}`;
      this.near = `198.18.${octet}.1`;
      this.far = `198.18.${octet}.2`;
      this.dir = join(work, `site-${name}`);
    }

    static async start(name: string, storePort: number, octet: number): Promise<Site> {
      const site = new Site(name, storePort, octet);
      await addLinkedNamespace({
        namespace: site.namespace,
        hostVeth: site.hostVeth,
        peerVeth: `${site.hostVeth}p`,
        near: site.near,
        far: site.far,
        defaultRoute: true,
      });
      await execa('tc', ['qdisc', 'add', 'dev', site.hostVeth, 'root', 'tbf', 'rate', '200mbit', 'burst', '256kb', 'latency', '50ms']);
      site.baseline = site.counter();
      return site;
    }

    /** Bytes sent from the root namespace into the site since it started: what crossed the uplink towards it. */
    downloaded(): number {
      return this.counter() - this.baseline;
    }

    /** Ms from `since` until `bytes` have crossed the uplink towards the site. */
    async whenDownloaded(bytes: number, since: number): Promise<number> {
      while (this.downloaded() < bytes) {
        if (Date.now() - since > 180_000)
          throw new Error(`${this.namespace}'s uplink carried ${this.downloaded()} of ${bytes} bytes in 180 s`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return Date.now() - since;
    }

    async startCache(): Promise<void> {
      const listen = `${this.far}:5080`;
      this.cache = execa(
        'ip',
        ['netns', 'exec', this.namespace, 'node', 'dist/apps/agent/src/cli.js', 'site-cache', '--store', this.store()].concat([
          '--listen',
          listen,
          '--dir',
          join(this.dir, 'cache'),
        ]),
        { reject: false, all: true },
      );
      await waitFor(
        'the site cache to answer',
        async () => (await fetch(`${this.cacheUrl()}/v2/`).catch(() => undefined))?.ok === true,
        30_000,
      );
    }

    async mount(volume: { manifestFile: string }, machine: string, throughCache: boolean): Promise<{ ms: number; fellBack: string[] }> {
      const env = {
        STORE: this.store(),
        ...(throughCache ? { SITE_CACHE: this.cacheUrl() } : {}),
        REPOSITORY: repoA,
        TOKEN: token(repoA),
        MANIFEST: volume.manifestFile,
        DIR: join(this.dir, machine),
      };
      return this.machine('test/volumes/site-machine.mjs', machine, env);
    }

    /** One machine of the site pulling `image` by digest with the agent's code, through the site's cache. */
    async pull(
      image: { repository: string; digest: string },
      machine: string,
    ): Promise<{ ms: number; rootfs: string; throughCache: boolean; fellBack: string[] }> {
      const registry = `${this.near}:${this.storePort}`;
      const env = {
        REGISTRY: registry,
        SITE_CACHE: this.cacheUrl(),
        TOKEN: token(image.repository),
        REF: `${registry}/${image.repository}@${image.digest}`,
        DIR: join(this.dir, machine),
      };
      return this.machine('test/volumes/site-image-machine.mjs', machine, env);
    }

    /** Runs one machine's script inside the site's namespace; what it printed, as JSON. */
    private async machine<T>(script: string, machine: string, env: Record<string, string>): Promise<T> {
      const ran = await execa('ip', ['netns', 'exec', this.namespace, 'node', script], { env, reject: false, all: true });
      if (ran.exitCode !== 0) throw new Error(`machine ${machine} of ${this.namespace} failed: ${ran.all}`);
      return JSON.parse(ran.stdout) as T;
    }

    async stop(): Promise<void> {
      this.cache?.kill('SIGTERM');
      await this.cache;
      await removeLinkedNamespace(this.namespace, this.hostVeth);
    }

    private store(): string {
      return `http://${this.near}:${this.storePort}`;
    }

    cacheUrl(): string {
      return `http://${this.far}:5080`;
    }

    private counter(): number {
      return Number(readFileSync(`/sys/class/net/${this.hostVeth}/statistics/tx_bytes`, 'utf8'));
    }
  }
});
