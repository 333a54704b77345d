import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { freePort, ImageError, skopeoCopy } from '#tern/runtime';
import { type RegistryAccessEntry, signRegistryToken } from '../../apps/gateway/src/registry-tokens/registry-token.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';

const describeRegistry = await describeNeeding(['umoci', 'skopeo', 'docker-registry', 'openssl']);

/**
 * The reference registry (distribution 2.8, as `npm run up` configures it for token auth) against
 * tokens signed the gateway's way: it must accept them (key id, signature, claims) and hold the
 * bearer to their access list.
 */
describeRegistry('the registry under token auth', () => {
  let work: string;
  let child: ResultPromise;
  let host: string;
  let key: ReturnType<typeof createPrivateKey>;
  const realm = 'http://127.0.0.1:9/api/v1/registry/token';

  const sign = (access: RegistryAccessEntry[], opts: { key?: typeof key; now?: number; service?: string } = {}) =>
    signRegistryToken(
      { key: opts.key ?? key, issuer: 'tern', service: opts.service ?? 'tern-registry', ttlSeconds: 300 },
      'test',
      access,
      opts.now,
    ).token;
  const repo = (name: string, ...actions: string[]): RegistryAccessEntry => ({ type: 'repository', name, actions });
  const copy = (to: string, token: string) =>
    skopeoCopy(to, `oci:${join(work, 'layout')}:tiny`, `docker://${host}/${to}`, [{ host, insecure: true, token }]);

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tern-registry-tokens-'));
    const port = await freePort();
    host = `127.0.0.1:${port}`;
    child = execa('node', ['scripts/lib/registry.mjs', join(work, 'registry'), String(port), realm], { reject: false, all: true });
    await waitFor('the registry to answer', async () => (await fetch(`http://${host}/v2/`).catch(() => undefined))?.status === 401, 30_000);
    key = createPrivateKey(await readFile(join(work, 'registry', 'token-key.pem')));
    // A tiny image (an empty root filesystem) to push and pull.
    await execa('umoci', ['init', '--layout', join(work, 'layout')]);
    await execa('umoci', ['new', '--image', `${join(work, 'layout')}:tiny`]);
  }, 60_000);

  afterAll(async () => {
    child?.kill('SIGTERM');
    await child;
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('sends clients to the gateway for a token', async () => {
    const res = await fetch(`http://${host}/v2/`);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(`Bearer realm="${realm}",service="tern-registry"`);
  });

  it('takes a push token for the repository it names, and a pull token pulls by digest', async () => {
    const digest = await copy('builds/tiny:1', sign([repo('builds/tiny', 'pull', 'push')]));
    expect(digest).toMatch(/^sha256:/);
    const pulled = await skopeoCopy('builds/tiny', `docker://${host}/builds/tiny@${digest}`, `oci:${join(work, 'pulled')}:x`, [
      { host, insecure: true, token: sign([repo('builds/tiny', 'pull')]) },
    ]);
    expect(pulled).toBe(digest);
  }, 60_000);

  it('refuses a push with a pull-only token, and a token for another repository', async () => {
    await expect(copy('builds/tiny:2', sign([repo('builds/tiny', 'pull')]))).rejects.toThrow(/denied|unauthorized|authentication required/);
    await expect(copy('builds/other:1', sign([repo('builds/tiny', 'pull', 'push')]))).rejects.toThrow(
      /denied|unauthorized|authentication required/,
    );
    const res = await fetch(`http://${host}/v2/builds/tiny/tags/list`, {
      headers: { authorization: `Bearer ${sign([repo('builds/elsewhere', 'pull')])}` },
    });
    expect(res.status).toBe(401);
  }, 60_000);

  it('refuses a token signed by another key, for another service, or expired', async () => {
    const stranger = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
    const push = [repo('builds/tiny', 'pull', 'push')];
    for (const token of [
      sign(push, { key: stranger }),
      sign(push, { service: 'elsewhere' }),
      sign(push, { now: Date.now() - 3_600_000 }),
    ]) {
      const res = await fetch(`http://${host}/v2/builds/tiny/tags/list`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(401);
    }
    await expect(copy('builds/tiny:3', sign(push, { key: stranger }))).rejects.toThrow(ImageError);
  }, 60_000);
});
