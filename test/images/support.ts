import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
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

/** A wheel made by hand (a zip with its dist-info): PyPI is not reachable here. */
export async function writeWheel(dir: string): Promise<void> {
  const stage = join(dir, 'stage');
  const info = join(stage, 'ternwheel-1.0.dist-info');
  await mkdir(join(stage, 'ternwheel'), { recursive: true });
  await mkdir(info, { recursive: true });
  const files: Record<string, string> = {
    'ternwheel/__init__.py': 'ANSWER = 42\n',
    'ternwheel-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\nName: ternwheel\nVersion: 1.0\n',
    'ternwheel-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
  };
  const record: string[] = [];
  for (const [path, text] of Object.entries(files)) {
    await writeFile(join(stage, path), text);
    const hash = createHash('sha256').update(text).digest('base64url');
    record.push(`${path},sha256=${hash},${Buffer.byteLength(text)}`);
  }
  record.push('ternwheel-1.0.dist-info/RECORD,,');
  await writeFile(join(info, 'RECORD'), `${record.join('\n')}\n`);
  await mkdir(join(dir, 'wheels'), { recursive: true });
  await execa(
    'python3',
    ['-m', 'zipfile', '-c', join(dir, 'wheels', 'ternwheel-1.0-py3-none-any.whl'), 'ternwheel', 'ternwheel-1.0.dist-info'],
    { cwd: stage },
  );
}

/**
 * A gateway's environment for a test registry with static users. The values are getters, read
 * when the gateway starts: its beforeAll runs after the one that starts the registry. `more`
 * adds plain values.
 */
export function staticRegistryEnv(registry: () => TestRegistry, more: Record<string, string> = {}): Record<string, string> {
  return {
    ...more,
    get REGISTRY_URL() {
      return `http://${registry().host}`;
    },
    get REGISTRY_PULL_USERNAME() {
      return registry().puller.username!;
    },
    get REGISTRY_PULL_PASSWORD() {
      return registry().puller.password!;
    },
    get REGISTRY_PUSH_USERNAME() {
      return registry().builder.username!;
    },
    get REGISTRY_PUSH_PASSWORD() {
      return registry().builder.password!;
    },
  };
}
