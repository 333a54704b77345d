import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import pg from 'pg';
import { type RegistryAccess, skopeoCopy } from '#tern/runtime';
import { readConfigFile } from '../../apps/agent/src/settings/config-file.js';
import { pushTestBase, TestRegistry } from '../images/support.js';
import { agentNetworkEnv, removeAgentNetwork } from '../support/agent-network.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { startStack, type Stack } from '../support/stack.js';

const describeImages = await describeNeeding(['root', 'runc', 'umoci', 'python3', 'skopeo', 'docker-registry', 'debootstrap', 'openssl']);

/**
 * The registry's credentials as the trust model wants them after `npm run up`: the registry takes
 * only the gateway's tokens; a machine logs in with its own machine token and may pull the images
 * of the containers placed on it and nothing else, and push nothing; the operator pushes.
 */
describeImages('registry credentials (token auth)', () => {
  let stack: Stack & { output: string };
  let host: string;
  let operator: RegistryAccess;
  let machine: RegistryAccess & { username: string; password: string };
  let base: { ref: string; digest: string };
  let other: { ref: string; digest: string };

  /** The token service's answer to `creds` (user:password) for `scopes`. */
  async function tokenFor(creds: string | undefined, scopes: string[], service = 'tern-registry') {
    const url = new URL(`${stack.gateway}/api/v1/registry/token`);
    url.searchParams.set('service', service);
    for (const s of scopes) url.searchParams.append('scope', s);
    const res = await fetch(url, { headers: creds ? { authorization: `Basic ${Buffer.from(creds).toString('base64')}` } : {} });
    return { status: res.status, body: (await res.json()) as { token?: string; message?: string | string[] } };
  }

  function access(token: string): unknown {
    return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { access: unknown }).access;
  }

  beforeAll(async () => {
    stack = await startStack('regauth');
    const config = JSON.parse(readFileSync(join(stack.env.HOME!, '.tern', 'config.json'), 'utf8')) as {
      contexts: { local: { registry: { url: string; tokenAuth?: boolean } } };
    };
    expect(config.contexts.local.registry.tokenAuth).toBe(true);
    host = new URL(config.contexts.local.registry.url).host;
    operator = { host, insecure: true, username: 'tern', password: stack.token };
    base = await pushTestBase({ host, builder: operator });
    other = await pushTestBase({ host, builder: operator }, 'team/private:1');
    const agents = join(stack.env.TERN_HOME!, 'agent');
    const file = readConfigFile(join(agents, readdirSync(agents)[0]!))!;
    machine = { host, insecure: true, username: file.machineId!, password: file.token };
  }, 600_000);

  afterAll(async () => {
    if (second && second.exitCode === null) {
      const exited = new Promise((r) => second!.once('exit', r));
      second.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      if (second.exitCode === null) second.kill('SIGKILL');
    }
    if (secondDir) removeAgentNetwork(secondDir);
    await external?.stop();
    if (externalDir) rmSync(externalDir, { recursive: true, force: true });
    await stack?.stop();
  });

  /** A second machine's agent, in a pool of its own, with its own state (and empty image cache). */
  let second: ChildProcess | undefined;
  let secondDir: string | undefined;

  /** A second registry, with users of its own (htpasswd), standing for a team's registry elsewhere. */
  let external: TestRegistry | undefined;
  let externalDir: string | undefined;

  /** A spec in a fresh dir: an endpoint on `image`, with the extra lines given. */
  function spec(name: string, image: string, extra = ''): string {
    const dir = stack.scratch(name);
    writeFileSync(
      join(dir, 'app.py'),
      'def predict(body):\n    with open("/etc/tern-base") as f:\n        return {"base": f.read().strip()}\n',
    );
    writeFileSync(
      join(dir, 'tern.yaml'),
      `name: ${name}\nkind: endpoint\nhandler: app.py:predict\nimage: ${image}\nkeep_warm_seconds: 60\n${extra}`,
    );
    return join(dir, 'tern.yaml');
  }

  async function call(method: string, path: string, token = stack.token, body?: unknown) {
    const res = await fetch(`${stack.gateway}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
  }

  /** One request to an endpoint, waiting as long as a first start with a pull may take. */
  function invoke(name: string, body: unknown = {}): Promise<Response> {
    return fetch(`${stack.gateway}/endpoint/${name}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(170_000),
    });
  }

  it('the machine pulls the image of a deployment placed on it with its own machine token, and serves it', async () => {
    const dir = stack.scratch('regauth-app');
    writeFileSync(join(dir, 'app.py'), 'def predict(body):\n    return {"n": body.get("n", 0) + 1}\n');
    writeFileSync(
      join(dir, 'tern.yaml'),
      `name: on-base\nkind: endpoint\nhandler: app.py:predict\nimage: ${base.ref}\nkeep_warm_seconds: 60\n`,
    );
    const deployed = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect(deployed.code).toBe(0);
    const res = await invoke('on-base', { n: 41 });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ n: 42 });

    // What the token service grants it: pull of the placed repository, never push.
    const granted = await tokenFor(`${machine.username}:${machine.password}`, ['repository:tern/base:pull,push']);
    expect(granted.status).toBe(200);
    expect(access(granted.body.token!)).toEqual([{ type: 'repository', name: 'tern/base', actions: ['pull'] }]);
  }, 300_000);

  it('a second machine with an empty image cache joins, pulls the image by digest with its own token and serves it', async () => {
    expect((await stack.tern('pool', 'create', 'second')).code).toBe(0);
    const created = await stack.tern('machine', 'create', '--pool', 'second', '--id', 'second-1', '--json');
    const { command } = JSON.parse(created.stdout) as { command: string };
    // Under the stack's agent dirs, so that stopping the stack removes its containers too.
    secondDir = join(stack.env.TERN_HOME!, 'agent', 'second');
    mkdirSync(secondDir, { recursive: true });
    const agentBin = join(process.cwd(), 'bin', 'tern-agent.js');
    await execa(process.execPath, [agentBin, ...command.split(' ').slice(1), '--state-dir', secondDir]);
    const env = {
      PATH: process.env.PATH,
      HOME: secondDir,
      LOG_LEVEL: 'info',
      NO_COLOR: '1',
      AGENT_DASHBOARD: 'off',
      ...agentNetworkEnv(secondDir),
    };
    const log = createWriteStream(join(secondDir, 'agent.out'));
    second = spawn(process.execPath, [agentBin, '--state-dir', secondDir], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    second.stdout!.pipe(log);
    second.stderr!.pipe(log);
    await waitFor(
      `second-1 ready (agent log: ${secondDir}/agent.out)`,
      async () => ((await call('GET', '/api/v1/machines/second-1')).body as { state?: string } | undefined)?.state === 'ready',
      120_000,
      500,
    );
    expect(existsSync(join(secondDir, 'images', 'layout'))).toBe(false); // nothing cached yet

    const deployed = await stack.tern('deploy', spec('on-second', base.ref, 'pool: second\n'));
    expect(deployed.code).toBe(0);
    const res = await invoke('on-second');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ base: 'debian bookworm minbase python3' });
    expect(readFileSync(join(secondDir, 'agent.out'), 'utf8')).toContain(`pulling ${host}/tern/base@${base.digest}`);
    await stack.tern('deployment', 'stop', 'on-second');
  }, 300_000);

  it('refuses the machine a pull of a repository not placed on it, and any push', async () => {
    const refused = await tokenFor(`${machine.username}:${machine.password}`, ['repository:team/private:pull']);
    expect(refused.status).toBe(200);
    expect(access(refused.body.token!)).toEqual([]);

    const work = stack.scratch('regauth-pull');
    await expect(skopeoCopy(other.ref, `docker://${host}/team/private@${other.digest}`, `oci:${work}:x`, [machine])).rejects.toThrow(
      /denied|unauthorized|authentication required/,
    );
    await expect(skopeoCopy(base.ref, `docker://${base.ref}`, `docker://${host}/tern/base:evil`, [machine])).rejects.toThrow(
      /denied|unauthorized|authentication required/,
    );
    // The operator may do both.
    expect(await skopeoCopy(other.ref, `docker://${host}/team/private@${other.digest}`, `oci:${work}:y`, [operator])).toBe(other.digest);
  }, 300_000);

  it('answers a missing or unknown credential with 401, a join token with 401, a wrong service with 400', async () => {
    expect((await tokenFor(undefined, ['repository:tern/base:pull'])).status).toBe(401);
    const unknown = await tokenFor('x:tern_nope', ['repository:tern/base:pull']);
    expect(unknown.status).toBe(401);
    const created = await stack.tern('machine', 'create', '--pool', 'default', '--id', 'never-joined', '--json');
    const { joinToken } = JSON.parse(created.stdout) as { joinToken: string };
    const join = await tokenFor(`x:${joinToken}`, ['repository:tern/base:pull']);
    expect(join.status).toBe(401);
    expect(String(join.body.message)).toContain('a join token is good for registering only');
    const wrongService = await tokenFor(`tern:${stack.token}`, ['repository:tern/base:pull'], 'elsewhere');
    expect(wrongService.status).toBe(400);
    expect(String(wrongService.body.message)).toContain('service "elsewhere" is not this registry\'s ("tern-registry")');
    const badScope = await tokenFor(`tern:${stack.token}`, ['repository:nothing']);
    expect(badScope.status).toBe(400);
  }, 60_000);

  it('lets the operator CLI list the registry through the token service', async () => {
    const listed = await stack.tern('image', 'list');
    expect(listed.stderr).toBe('');
    expect(listed.stdout).toMatch(new RegExp(`${host.replace(/\./g, '\\.')}/team/private\\s+1`));
  }, 60_000);
  it('keeps a workspace secret sealed: listed without its value, stored encrypted, another workspace sees none of it', async () => {
    externalDir = mkdtempSync(join(tmpdir(), 'tern-external-registry-'));
    external = await TestRegistry.start(join(externalDir, 'registry'));
    const { username, password } = external.builder;
    const set = await stack.tern('secret', 'set', 'team-registry', `${username}:${password}`);
    expect(set.stdout).toContain('secret team-registry created');
    const listed = await stack.tern('secret', 'list');
    expect(listed.stdout).toMatch(/team-registry\s+\d+ bytes/);
    const api = await call('GET', '/api/v1/secrets');
    expect(api.status).toBe(200);
    expect(api.text).not.toContain(password!);
    expect(api.body).toEqual([expect.objectContaining({ name: 'team-registry', bytes: `${username}:${password}`.length })]);
    // Stored sealed: the value is nowhere in the row.
    const db = new pg.Client({ connectionString: stack.env.DATABASE_URL });
    await db.connect();
    try {
      const { rows } = await db.query<{ sealed: string }>(`SELECT sealed FROM "${stack.env.DATABASE_SCHEMA}".workspace_secrets`);
      expect(rows).toHaveLength(1);
      expect(rows[0]!.sealed).toMatch(/^v1\./);
      expect(rows[0]!.sealed).not.toContain(password!);
      expect(Buffer.from(rows[0]!.sealed.split('.')[3]!, 'base64url').toString('latin1')).not.toContain(password!);
    } finally {
      await db.end();
    }
    const other = await call('POST', '/api/v1/workspaces', stack.token, { name: 'other-team' });
    const otherToken = (other.body as { token: string }).token;
    expect(await call('GET', '/api/v1/secrets', otherToken)).toMatchObject({ status: 200, body: [] });
    expect((await call('DELETE', '/api/v1/secrets/team-registry', otherToken)).status).toBe(404);
    const bad = await call('PUT', '/api/v1/secrets/has%20space', stack.token, { value: 'x' });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('name must be letters, digits, _ . or -');
  }, 120_000);

  it('deploys an image from a registry with credentials from a secret: the gateway copies it, the machine pulls the copy', async () => {
    const pushed = await pushTestBase({ host: external!.host, builder: external!.builder }, 'team/model:1');
    const deployed = await stack.tern('deploy', spec('from-elsewhere', pushed.ref, 'registry_secret: team-registry\n'));
    expect(deployed.stderr).toBe('');
    expect(deployed.code).toBe(0);
    const detail = await call('GET', '/api/v1/deployments/from-elsewhere');
    const mirrored = `${host}/mirror/${external!.host.replace(':', '-')}/team/model@${pushed.digest}`;
    expect((detail.body as { spec: { image: string } }).spec.image).toBe(mirrored);
    const res = await invoke('from-elsewhere');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ base: 'debian bookworm minbase python3' });
    // Naming the copy directly is refused: it would run another workspace's credentialed image.
    const direct = await stack.tern('deploy', spec('copy-by-name', mirrored));
    expect(direct.code).not.toBe(0);
    expect(direct.stderr).toContain("mirror/ holds Tern's copies of images from other registries");
  }, 300_000);

  it('fails the deploy naming the reference when the credentials are wrong, the secret missing or the registry unreachable', async () => {
    const ref = `${external!.host}/team/model:1`;
    await stack.tern('secret', 'set', 'wrong', 'builder:not-the-password');
    const wrong = await stack.tern('deploy', spec('wrong-creds', ref, 'registry_secret: wrong\n'));
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(
      new RegExp(`image ${ref.replace(/\./g, '\\.')}: cannot resolve in its registry: .*(unauthorized|authentication required)`, 's'),
    );
    expect(wrong.stderr).not.toContain('not-the-password');

    const missing = await stack.tern('deploy', spec('no-secret', ref, 'registry_secret: nope\n'));
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('registry_secret: no secret "nope" in this workspace (tern secret set nope)');

    const unreachable = await stack.tern('deploy', spec('unreachable', '127.0.0.1:1/team/model:1', 'registry_secret: team-registry\n'));
    expect(unreachable.code).not.toBe(0);
    expect(unreachable.stderr).toMatch(
      /image 127\.0\.0\.1:1\/team\/model:1: cannot resolve in its registry: .*(connection refused|dial tcp)/s,
    );

    await stack.tern('secret', 'set', 'no-colon', 'just-a-token');
    const malformed = await stack.tern('deploy', spec('malformed', ref, 'registry_secret: no-colon\n'));
    expect(malformed.stderr).toContain('registry_secret: secret "no-colon" must hold <username>:<password>');
    const removed = await stack.tern('secret', 'rm', 'no-colon');
    expect(removed.stdout).toContain('secret no-colon deleted');
  }, 120_000);
  it('refuses an image whose blob was tampered with in the registry: the container fails naming the digest', async () => {
    // An image with a layer of its own (random bytes), so that only it is tampered with.
    const work = stack.scratch('regauth-tamper');
    const layout = `${work}/layout`;
    await skopeoCopy(base.ref, `docker://${base.ref}`, `oci:${layout}:t`, [operator]);
    mkdirSync(join(work, 'fill'));
    writeFileSync(join(work, 'fill', 'bytes'), randomBytes(1 << 20));
    await execa('umoci', ['insert', '--image', `${layout}:t`, join(work, 'fill'), '/opt/fill']);
    const digest = await skopeoCopy('tampered', `oci:${layout}:t`, `docker://${host}/team/tampered:1`, [operator]);
    const manifest = JSON.parse(
      (
        await execa('skopeo', [
          'inspect',
          '--raw',
          '--tls-verify=false',
          '--creds',
          `tern:${stack.token}`,
          `docker://${host}/team/tampered@${digest}`,
        ])
      ).stdout,
    ) as { layers: { digest: string }[] };
    const hex = manifest.layers.at(-1)!.digest.slice('sha256:'.length);
    const blob = join(stack.env.TERN_HOME!, 'registry', 'storage', 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
    const bytes = readFileSync(blob);
    bytes[bytes.length >> 1] ^= 0xff;
    writeFileSync(blob, bytes);

    // The machine's cores free again (the earlier endpoints stay warm for 60 s), so that the
    // tampered image's container is placed and fails on its pull, not for want of room.
    for (const name of ['on-base', 'from-elsewhere']) await stack.tern('deployment', 'stop', name);
    await waitFor(
      'the earlier endpoints stopped',
      async () => (await stack.actual('on-base')) + (await stack.actual('from-elsewhere')) === 0,
      60_000,
      500,
    );
    // A caller waits for a container until the endpoint's timeout, then hears why there was none.
    const deployed = await stack.tern('deploy', spec('tampered', `${host}/team/tampered:1`, 'timeout: 30\n'), '--no-wait');
    expect(deployed.code).toBe(0); // the manifest is intact: the tag pins
    // An endpoint starts a container on its first request; that one cannot be answered.
    const invoked = invoke('tampered', {}).then(async (r) => ({
      status: r.status,
      message: ((await r.json()) as { message: string }).message,
    }));
    // The control plane's record of the failed start (the API lists live containers only).
    const db = new pg.Client({ connectionString: stack.env.DATABASE_URL });
    await db.connect();
    let rows: { state: string; reason: string | null }[] = [];
    try {
      for (const deadline = Date.now() + 150_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 1000))) {
        rows = (
          await db.query<{ state: string; reason: string | null }>(
            `SELECT c.state, c.state_reason AS reason FROM "${stack.env.DATABASE_SCHEMA}".containers c
             JOIN "${stack.env.DATABASE_SCHEMA}".deployment_versions v ON v.id = c.deployment_version_id
             JOIN "${stack.env.DATABASE_SCHEMA}".deployments d ON d.id = v.deployment_id
             WHERE d.name = 'tampered'`,
          )
        ).rows;
        if (rows.some((r) => r.state === 'failed')) break;
      }
    } finally {
      await db.end();
    }
    expect(await invoked).toEqual({
      status: 504,
      message: expect.stringMatching(
        new RegExp(`within 30 s; its last container start failed: .*team/tampered@${digest}.*digest`, 'is'),
      ) as unknown,
    });
    // The failed start names the image and why: its blob did not match its digest.
    expect(rows).toEqual(
      expect.arrayContaining([
        { state: 'failed', reason: expect.stringMatching(new RegExp(`team/tampered@${digest}.*digest`, 'is')) as unknown },
      ]),
    );
    await stack.tern('deployment', 'stop', 'tampered');
  }, 300_000);
});
