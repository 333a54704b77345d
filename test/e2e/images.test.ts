import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '#tern/runtime';
import { pushTestBase, writeWheel } from '../images/support.js';
import { waitFor } from '../support/processes.js';
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
      contexts: { local: { registry: { url: string; insecure: boolean; tokenAuth?: boolean } } };
    };
    const r = config.contexts.local.registry;
    expect(r.tokenAuth).toBe(true);
    const host = new URL(r.url).host;
    // The registry takes the gateway's tokens: the operator's API token is the password.
    registry = { url: r.url, host, builder: { host, insecure: r.insecure, username: 'tern', password: stack.token } };
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

  async function buildNow(image: object, name: string): Promise<{ ms: number; events: { type: string; reused?: boolean }[] }> {
    const t0 = Date.now();
    const res = await fetch(`${stack.gateway}/api/v1/images/builds`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, image }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    return {
      ms: Date.now() - t0,
      events: text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string }),
    };
  }

  it('deploys examples/numpy-endpoint: builds its image on the builder agent (a progress line per step), answers the checksum, and a second deploy builds nothing', async () => {
    await pushTestBase(registry, 'tern/base:bookworm');
    const machine = await stack.tern('machine', 'list', '--json');
    const machineId = (JSON.parse(machine.stdout) as { id: string }[])[0]!.id;
    expect((await stack.tern('machine', 'show', machineId)).stdout).toMatch(/Builds images +yes/);

    const dir = stack.scratch('numpy');
    cpSync(join(EXAMPLES, 'numpy-endpoint'), dir, { recursive: true });
    const first = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect({ code: first.code, stderr: first.stderr }).toEqual({ code: 0, stderr: '' });
    expect(first.stdout).toContain(`building on machine ${machineId}`);
    // The step's line, then its own output as it ran (apt's), then the result.
    const step = first.stdout.indexOf('[1/1] apt: python3-numpy\n');
    const output = first.stdout.indexOf('Setting up python3-numpy');
    const built = first.stdout.search(
      /Built \S+\/builds\/[0-9a-f-]{36}\/numpy@sha256:[0-9a-f]{64} in [\d.]+s \(0\/1 steps from the cache\)/,
    );
    expect(step).toBeGreaterThan(0);
    expect(output).toBeGreaterThan(step);
    expect(built).toBeGreaterThan(output);
    expect(first.stdout).toContain('Deployed numpy version 1');

    const res = await fetch(`${stack.gateway}/endpoint/numpy`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ n: 50 }),
      signal: AbortSignal.timeout(170_000),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ n: 50, ...expectedChecksum(50) });

    const second = await stack.tern('deploy', join(dir, 'tern.yaml'), '--no-wait');
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/Image unchanged: \S+\/builds\/[0-9a-f-]{36}\/numpy@sha256:[0-9a-f]{64} \(nothing to build\)/);
    expect(second.stdout).not.toContain('[1/1]');
    // The gateway's own answer for an unchanged spec: from the registry, nothing sent to a builder.
    const again = await buildNow({ apt: ['python3-numpy'] }, 'numpy');
    expect(again.events).toEqual([expect.objectContaining({ type: 'built', reused: true, cachedSteps: 1, steps: 1 })]);
    expect(again.ms).toBeLessThan(1000);
  }, 900_000);

  it('rebuilds only the layer of a changed commands line', async () => {
    const dir = stack.scratch('numpy-commands');
    cpSync(join(EXAMPLES, 'numpy-endpoint'), dir, { recursive: true });
    const spec = (second: string) =>
      readFileSync(join(EXAMPLES, 'numpy-endpoint', 'tern.yaml'), 'utf8').replace(
        '  apt: [python3-numpy]\n',
        `  apt: [python3-numpy]\n  commands: ["echo one > /opt/one", "${second}"]\n`,
      );
    writeFileSync(join(dir, 'tern.yaml'), spec('echo two > /opt/two'));
    const first = await stack.tern('image', 'build', join(dir, 'tern.yaml'));
    expect({ code: first.code, stderr: first.stderr }).toEqual({ code: 0, stderr: expect.any(String) as unknown });
    expect(first.stderr).toContain('[1/3] apt: python3-numpy (cached)\n');
    expect(first.stderr).toMatch(/\[3\/3\] commands\[1\]: echo two > \/opt\/two\n/);

    writeFileSync(join(dir, 'tern.yaml'), spec('echo deux > /opt/two'));
    const changed = await stack.tern('image', 'build', join(dir, 'tern.yaml'));
    expect({ code: changed.code, stderr: changed.stderr }).toEqual({ code: 0, stderr: expect.any(String) as unknown });
    expect(changed.stderr).toContain('[1/3] apt: python3-numpy (cached)\n');
    expect(changed.stderr).toContain('[2/3] commands[0]: echo one > /opt/one (cached)\n');
    expect(changed.stderr).toContain('[3/3] commands[1]: echo deux > /opt/two\n');
    expect(changed.stderr).toMatch(/\(2\/3 steps from the cache\)/);
    expect(changed.stdout.trim()).toMatch(/\/builds\/[0-9a-f-]{36}\/numpy@sha256:[0-9a-f]{64}$/);
    expect(changed.stdout.trim()).not.toBe(first.stdout.trim());
  }, 600_000);

  it('builds two identical specs asked for at once only once', async () => {
    const image = { commands: [`echo twin-${Date.now()} > /opt/twin`] };
    const [a, b] = await Promise.all([buildNow(image, 'twin'), buildNow(image, 'twin')]);
    const built = (r: typeof a) => r.events.find((e) => e.type === 'built') as { ref: string } | undefined;
    expect(built(a)?.ref).toBeDefined();
    expect(built(a)?.ref).toBe(built(b)?.ref);
    const ran = (r: typeof a) => r.events.filter((e) => e.type === 'step' && !(e as { cached?: boolean }).cached).length;
    expect(ran(a) + ran(b)).toBeLessThanOrEqual(2);
    // Followed on the gateway: both callers saw the one build, which sent one command to the builder.
    expect(a.events.filter((e) => e.type === 'log' && /building on machine/.test((e as { line?: string }).line ?? ''))).toHaveLength(1);
  }, 300_000);

  it('installs pip: requirements from a wheels directory in the spec folder and from an index URL', async () => {
    const dir = stack.scratch('pip-app');
    await writeWheel(dir);
    const index = join(dir, 'index');
    mkdirSync(join(index, 'simple', 'ternwheel'), { recursive: true });
    cpSync(join(dir, 'wheels', 'ternwheel-1.0-py3-none-any.whl'), join(index, 'simple', 'ternwheel', 'ternwheel-1.0-py3-none-any.whl'));
    writeFileSync(
      join(index, 'simple', 'ternwheel', 'index.html'),
      '<html><body><a href="ternwheel-1.0-py3-none-any.whl">ternwheel-1.0-py3-none-any.whl</a></body></html>\n',
    );
    const check = `python3 -c "import ternwheel; print('ternwheel', ternwheel.ANSWER)"`;
    writeFileSync(
      join(dir, 'tern.yaml'),
      `name: pip-wheels\nimage:\n  apt: [python3-pip]\n  pip: [ternwheel==1.0]\n  pip_wheels: wheels\n  commands:\n    - ${JSON.stringify(check)}\n`,
    );
    const wheels = await stack.tern('image', 'build', join(dir, 'tern.yaml'));
    expect({ code: wheels.code, stderr: wheels.stderr }).toEqual({
      code: 0,
      stderr: expect.stringContaining('[2/3] pip: ternwheel==1.0\n'),
    });
    expect(wheels.stderr).toContain('ternwheel 42');

    const port = await freePort();
    const server = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', index], { stdio: 'ignore' });
    try {
      await waitFor(
        'the index to answer',
        async () => (await fetch(`http://127.0.0.1:${port}/simple/`).catch(() => undefined))?.ok === true,
        10_000,
      );
      writeFileSync(
        join(dir, 'tern.yaml'),
        `name: pip-index\nimage:\n  apt: [python3-pip]\n  pip: [ternwheel==1.0]\n  pip_index_url: http://127.0.0.1:${port}/simple/\n  commands:\n    - ${JSON.stringify(check)}\n`,
      );
      const indexed = await stack.tern('image', 'build', join(dir, 'tern.yaml'));
      expect({ code: indexed.code, stderr: indexed.stderr }).toEqual({
        code: 0,
        stderr: expect.stringContaining('[1/3] apt: python3-pip (cached)\n'),
      });
      expect(indexed.stderr).toContain(`Looking in indexes: http://127.0.0.1:${port}/simple/`);
      expect(indexed.stderr).toContain('ternwheel 42');
    } finally {
      server.kill();
    }
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
    expect({ code: deployed.code, stderr: deployed.stderr }).toEqual({ code: 0, stderr: '' });
    expect(deployed.stdout).toContain('[2/2] npm: lodash@4\n');
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

  it('fails the deploy naming the step and why: an unknown apt package, a failing command', async () => {
    const dir = stack.scratch('bad-build');
    writeFileSync(join(dir, 'app.py'), 'def predict(body):\n    return body\n');
    writeFileSync(
      join(dir, 'tern.yaml'),
      'name: bad-apt\nkind: endpoint\nhandler: app.py:predict\nimage:\n  apt: [no-such-package-tern]\n',
    );
    const apt = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect(apt.code).not.toBe(0);
    expect(apt.stderr).toMatch(
      /the image build failed at step apt: .*step apt failed \(exit 100\).*Unable to locate package no-such-package-tern/s,
    );

    writeFileSync(
      join(dir, 'tern.yaml'),
      'name: bad-command\nkind: endpoint\nhandler: app.py:predict\nimage:\n  commands: ["echo half-way; exit 3"]\n',
    );
    const command = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect(command.code).not.toBe(0);
    expect(command.stderr).toMatch(
      /the image build failed at step commands\[0\]: .*step commands\[0\] failed \(exit 3\): echo half-way; exit 3\nhalf-way/s,
    );
    // Nothing was deployed, and nothing half-built is in the registry.
    const listed = await fetch(`${stack.gateway}/api/v1/deployments/bad-command`, { headers: { authorization: `Bearer ${stack.token}` } });
    expect(listed.status).toBe(404);
    expect((await stack.tern('image', 'list')).stdout).not.toMatch(/bad-(apt|command)/);
  }, 600_000);

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
