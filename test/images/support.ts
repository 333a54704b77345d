import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { buildBaseImage, freePort, type RegistryAccess } from '#tern/runtime';
import { waitFor } from '../support/processes.js';

/**
 * Where tests keep the debootstrapped base between runs (it takes a minute or more to build):
 * every test of a run shares one build, and the next run reuses it.
 */
export const TEST_IMAGE_CACHE = process.env.TERN_TEST_IMAGE_CACHE ?? join(tmpdir(), 'tern-test-image-cache');

/** A private registry, started the way `npm run up` starts one (scripts/lib/registry.mjs). */
export class TestRegistry {
  private constructor(
    readonly dir: string,
    readonly host: string,
    readonly builder: RegistryAccess,
    readonly puller: RegistryAccess,
    private readonly child: ResultPromise,
  ) {}

  static async start(dir: string): Promise<TestRegistry> {
    const port = await freePort();
    const child = execa('node', ['scripts/lib/registry.mjs', dir, String(port)], { reject: false, all: true });
    const host = `127.0.0.1:${port}`;
    await waitFor('the registry to answer', async () => (await fetch(`http://${host}/v2/`).catch(() => undefined))?.status === 401, 30_000);
    const creds = JSON.parse(await readFile(join(dir, 'credentials.json'), 'utf8')) as Record<
      string,
      { username: string; password: string }
    >;
    const access = (role: string): RegistryAccess => ({ host, insecure: true, ...creds[role]! });
    return new TestRegistry(dir, host, access('builder'), access('puller'), child);
  }

  async stop(): Promise<void> {
    this.child.kill('SIGTERM');
    await this.child;
  }
}

/** The base every image test uses: minbase and python3 (Tern's Python runner), one debootstrap shared by all. */
export const TEST_BASE_PACKAGES = ['python3'];

/** Tern's base, debootstrapped once (TEST_IMAGE_CACHE) and pushed to `registry`. */
export async function pushTestBase(
  registry: { host: string; builder: RegistryAccess },
  repo = 'tern/base:test',
): Promise<{ ref: string; digest: string }> {
  const ref = `${registry.host}/${repo}`;
  const digest = await buildBaseImage(ref, [registry.builder], { cacheDir: TEST_IMAGE_CACHE, include: TEST_BASE_PACKAGES });
  return { ref, digest };
}
