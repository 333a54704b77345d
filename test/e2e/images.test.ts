import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pushTestBase } from '../images/support.js';
import { describeNeeding } from '../support/real-parts.js';
import { startStack, type Stack } from '../support/stack.js';

const describeImages = await describeNeeding(['root', 'runc', 'umoci', 'python3', 'skopeo', 'docker-registry', 'debootstrap']);

let stack: Stack & { output: string };

const EXAMPLES = fileURLToPath(new URL('../../examples', import.meta.url));

/** The numpy example's answer, computed here without numpy. */
function expectedChecksum(n: number): { checksum: number; trace: number } {
  let checksum = 0;
  let trace = 0;
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      let c = 0;
      for (let k = 0; k < n; k++) c += ((i * n + k) % 7) * ((j * n + k) % 5);
      checksum += c;
      if (i === j) trace += c;
    }
  return { checksum, trace };
}

/** The images issue as a newcomer meets it after `npm run up`: a registry is there, a deployment names an image in it. */
describeImages('registry images end to end', () => {
  let registry: { url: string; host: string; builder: { host: string; insecure: boolean; username: string; password: string } };

  beforeAll(async () => {
    stack = await startStack('images');
    expect(stack.output).toMatch(/Registry: +http:\/\/127\.0\.0\.1:\d+/);
    const config = JSON.parse(readFileSync(join(stack.env.HOME!, '.tern', 'config.json'), 'utf8')) as {
      contexts: { local: { registry: { url: string; insecure: boolean; username: string; password: string } } };
    };
    const r = config.contexts.local.registry;
    const host = new URL(r.url).host;
    registry = { url: r.url, host, builder: { host, insecure: r.insecure, username: r.username, password: r.password } };
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
  });

  function app(image: string): string {
    const dir = stack.scratch('image-app');
    writeFileSync(
      join(dir, 'app.py'),
      [
        'import platform',
        'def predict(body):',
        '    with open("/etc/tern-base") as f:',
        '        base = f.read().strip()',
        '    return {"base": base, "python": platform.python_version(), "n": body.get("n", 0) * 2}',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'tern.yaml'),
      `name: in-image\nkind: endpoint\nhandler: app.py:predict\nimage: ${image}\nkeep_warm_seconds: 5\n`,
    );
    return join(dir, 'tern.yaml');
  }

  it('deploys a handler on an image from the private registry: the tag is pinned to its digest and the agent pulls it', async () => {
    const base = await pushTestBase(registry);
    const deployed = await stack.tern('deploy', app(base.ref));
    expect(deployed.stderr).toBe('');
    expect(deployed.code).toBe(0);

    const detail = await fetch(`${stack.gateway}/api/v1/deployments/in-image`, { headers: { authorization: `Bearer ${stack.token}` } });
    expect(((await detail.json()) as { spec: { image: string } }).spec.image).toBe(`${registry.host}/tern/base@${base.digest}`);

    const res = await fetch(`${stack.gateway}/endpoint/in-image`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ n: 21 }),
      signal: AbortSignal.timeout(170_000),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      base: 'debian bookworm minbase python3',
      n: 42,
      python: expect.stringMatching(/^3\.11\./) as unknown,
    });

    const images = await stack.tern('image', 'list');
    expect(images.stdout).toMatch(new RegExp(`${registry.host.replace(/\./g, '\\.')}/tern/base\\s+test`));

    const listed = await stack.tern('image', 'show', 'tern/base:test');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(`tern/base@${base.digest}`);
    expect(listed.stdout).toContain('debootstrap bookworm');
  }, 400_000);

  it('deploys examples/numpy-endpoint: builds its image (progress per step), answers the checksum, and a second deploy builds nothing', async () => {
    await pushTestBase(registry, 'tern/base:bookworm');
    const dir = stack.scratch('numpy');
    cpSync(join(EXAMPLES, 'numpy-endpoint'), dir, { recursive: true });
    const first = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/step 1\/1 apt: running: apt-get update/);
    expect(first.stdout).toMatch(/built in [\d.]+s \(0\/1 steps from the cache\)/);
    expect(first.stdout).toContain('Deployed numpy version 1');

    const res = await fetch(`${stack.gateway}/endpoint/numpy`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ n: 50 }),
      signal: AbortSignal.timeout(170_000),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ n: 50, ...expectedChecksum(50) });

    const t0 = Date.now();
    const second = await stack.tern('deploy', join(dir, 'tern.yaml'), '--no-wait');
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/step 1\/1 apt: cached/);
    expect(second.stdout).toMatch(/\(1\/1 steps from the cache\)/);
    // No step runs: what remains is the CLI's start, a registry round trip and the deploy call.
    expect(Date.now() - t0).toBeLessThan(20_000);
  }, 900_000);

  it('deploys a Node handler whose npm: dependency the build fetched', async () => {
    const dir = stack.scratch('npm-app');
    writeFileSync(
      join(dir, 'app.cjs'),
      "const _ = require('lodash');\nexports.predict = (input) => ({ sum: _.sum(input.xs), lodash: _.VERSION, node: process.version });\n",
    );
    writeFileSync(
      join(dir, 'tern.yaml'),
      'name: with-npm\nkind: endpoint\nhandler: app.cjs:predict\nkeep_warm_seconds: 5\nimage:\n  apt: [nodejs]\n  npm: [lodash@4]\n',
    );
    const deployed = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect(deployed.code).toBe(0);
    expect(deployed.stdout).toMatch(/step 2\/2 npm: running/);
    const res = await fetch(`${stack.gateway}/endpoint/with-npm`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ xs: [1, 2, 39] }),
      signal: AbortSignal.timeout(170_000),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      sum: 42,
      lodash: expect.stringMatching(/^4\./) as unknown,
      node: expect.stringMatching(/^v18\./) as unknown,
    });
  }, 900_000);

  it('fails the deploy naming the reference when the registry is unreachable, the tag missing or the reference malformed', async () => {
    const unreachable = await stack.tern('deploy', app('127.0.0.1:1/team/model:1'));
    expect(unreachable.code).not.toBe(0);
    expect(unreachable.stderr).toMatch(
      /image: image 127\.0\.0\.1:1\/team\/model:1: cannot resolve in its registry: .*(connection refused|dial tcp)/s,
    );

    const missing = await stack.tern('deploy', app(`${registry.host}/tern/nothing:here`));
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(
      new RegExp(
        `image ${registry.host.replace(/\./g, '\\.')}/tern/nothing:here: cannot resolve in its registry: .*(unknown|not found)`,
        'is',
      ),
    );

    const malformed = await stack.tern('deploy', app('python:3.12'));
    expect(malformed.code).not.toBe(0);
    expect(malformed.stderr).toContain('image "python:3.12" names no registry');
  }, 120_000);
});
