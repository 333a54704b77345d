import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decode } from '@nats-io/jwt';
import { connect, credsAuthenticator } from '@nats-io/transport-node';
import { parse, parseAllDocuments } from 'yaml';
import { type NatsPrincipal } from '#tern/contracts';
import { type AccountSigner, formatCreds, inboxPrefix, issueMachineJwt, newUserKey } from '#tern/nats-auth';
import { describeNeeding } from './support/real-parts.js';
import { freePort, waitFor } from './support/processes.js';

type Any = any;

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CONTROL_PLANE: NatsPrincipal[] = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'];
const enc = new TextEncoder();

/** The user JWT's claims in a .creds text. */
function credsClaims(creds: string): Any {
  const jwt = /-----BEGIN NATS USER JWT-----\s+(\S+)\s+------END NATS USER JWT------/.exec(creds)?.[1];
  if (!jwt) throw new Error('no user JWT in the .creds text');
  return decode(jwt);
}

function run(args: string[]): string {
  return execFileSync('node', args, { cwd: ROOT, encoding: 'utf8' });
}

/**
 * What docker-compose's nats-auth service and the k8s one-time command write, run for real
 * (the very command docker-compose.yml names, into a temporary folder instead of its volumes),
 * then a real nats-server started with the server.conf they mount: each service's mounted
 * creds connect as that service, the gateway's signer issues machine users the server accepts,
 * and an anonymous connection is refused.
 */
(await describeNeeding(['nats-server']))('NATS operator material for docker-compose and k8s', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'tern-deploy-auth-'));
  const dir = join(tmp, 'nats-auth');
  const compose: Any = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true });
  const init: string[] = compose.services['nats-auth'].command;
  const containerDir = init[3];
  let port: number;
  let url: string;
  let server: ChildProcess | undefined;

  /** The compose command with its folder, NATS store and listen address moved to this test's. */
  const initArgs = (command: string) => {
    const args = [...init.slice(1)];
    args[1] = command;
    args[2] = dir;
    const set = (name: string, value: string) => {
      const i = args.indexOf(`--${name}`);
      if (i >= 0) args[i + 1] = value;
      else args.push(`--${name}`, value);
    };
    set('store-dir', join(tmp, 'data'));
    set('resolver-dir', join(tmp, 'data', 'jwt'));
    set('host', '127.0.0.1');
    set('port', String(port));
    // Handing folders to another user needs root; the test runs as whoever runs it.
    if (process.getuid?.() !== 0) {
      const i = args.indexOf('--owner');
      if (i >= 0) args.splice(i, 2);
    }
    return args;
  };

  /** Where the init service wrote what a compose service mounts at `path` (its temporary twin). */
  const composeSource = (svc: string, path: string): string => {
    for (const v of compose.services[svc].volumes ?? []) {
      const [volume, target] = String(v).split(':');
      if (path !== target && !path.startsWith(`${target}/`)) continue;
      const initMount = (compose.services['nats-auth'].volumes as string[]).find((m) => m.split(':')[0] === volume);
      if (!initMount) throw new Error(`${svc} mounts ${volume}, which nats-auth does not write`);
      return join(dir, relative(containerDir, initMount.split(':')[1]), relative(target, path));
    }
    throw new Error(`${svc} mounts nothing at ${path}`);
  };

  beforeAll(async () => {
    port = await freePort();
    url = `nats://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    if (server && server.exitCode === null) {
      server.kill('SIGTERM');
      await once(server, 'exit');
    }
    rmSync(tmp, { recursive: true, force: true });
  });

  it('is the deploy command of scripts/nats-auth.mjs, run once before NATS and the services', () => {
    expect(init.slice(0, 3)).toEqual(['node', 'scripts/nats-auth.mjs', 'deploy']);
    for (const svc of ['nats', ...CONTROL_PLANE]) {
      expect(compose.services[svc].depends_on['nats-auth']).toEqual({ condition: 'service_completed_successfully' });
    }
    expect(compose.services['nats-auth'].restart).toBe('no');
  });

  it('makes the keys once: a second run keeps every key and re-issues the same users', () => {
    run(initArgs('deploy'));
    const installation = readFileSync(join(dir, 'operator', 'installation.json'), 'utf8');
    const signer = readFileSync(join(dir, 'gateway', 'signer.json'), 'utf8');
    const users = CONTROL_PLANE.map((svc) => credsClaims(readFileSync(join(dir, svc, 'nats.creds'), 'utf8')).sub as string);
    run(initArgs('deploy'));
    expect(readFileSync(join(dir, 'operator', 'installation.json'), 'utf8')).toBe(installation);
    expect(readFileSync(join(dir, 'gateway', 'signer.json'), 'utf8')).toBe(signer);
    expect(CONTROL_PLANE.map((svc) => credsClaims(readFileSync(join(dir, svc, 'nats.creds'), 'utf8')).sub)).toEqual(users);
    for (const f of ['operator/installation.json', 'server/server.conf', 'gateway/signer.json', 'gateway/nats.creds']) {
      expect((statSync(join(dir, f)).mode & 0o777).toString(8)).toBe('600');
    }
    if (process.getuid?.() === 0) {
      // The services run as the image's node user (1000); the operator's seeds stay root's.
      for (const svc of CONTROL_PLANE) expect(statSync(join(dir, svc, 'nats.creds')).uid).toBe(1000);
      expect(statSync(join(dir, 'operator', 'installation.json')).uid).toBe(0);
    }
  });

  it('starts nats-server from the server.conf the nats service mounts, refusing anonymous connections', async () => {
    const nats = compose.services.nats;
    const configPath = nats.command[nats.command.indexOf('-c') + 1];
    server = spawn('nats-server', ['-c', composeSource('nats', configPath)], { stdio: 'ignore' });
    await waitFor('nats-server', async () => {
      const nc = await connect({ servers: url, reconnect: false }).catch((e: Error) => e);
      if (nc instanceof Error) return /Authorization Violation/.test(nc.message) ? true : undefined;
      await nc.close();
      throw new Error('an anonymous connection was accepted');
    });
  });

  it.each(CONTROL_PLANE)('%s connects as itself with the creds file NATS_CREDS names in its container', async (svc) => {
    const creds = readFileSync(composeSource(svc, compose.services[svc].environment.NATS_CREDS), 'utf8');
    expect(credsClaims(creds).name).toBe(`tern-${svc}`);
    const nc = await connect({
      servers: url,
      reconnect: false,
      authenticator: credsAuthenticator(enc.encode(creds)),
      inboxPrefix: inboxPrefix('tern', svc),
    });
    try {
      // JetStream answers it: the user belongs to the Tern account.
      const info = (await nc.request('$JS.API.INFO', '', { timeout: 5000 })).json<Any>();
      expect(info.type).toBe('io.nats.jetstream.api.v1.account_info_response');
    } finally {
      await nc.close();
    }
  });

  it("the gateway's mounted signer issues machine users the server accepts", async () => {
    const signer = JSON.parse(
      readFileSync(composeSource('gateway', compose.services.gateway.environment.NATS_ACCOUNT_SIGNER), 'utf8'),
    ) as AccountSigner;
    const key = newUserKey();
    const jwt = await issueMachineJwt(signer, { namespace: 'tern', machineId: 'm-deploy', publicKey: key.publicKey, expiresInSeconds: 60 });
    const nc = await connect({
      servers: url,
      reconnect: false,
      authenticator: credsAuthenticator(enc.encode(formatCreds(jwt, key.seed))),
      inboxPrefix: inboxPrefix('tern', 'agent', 'm-deploy'),
    });
    await nc.flush();
    await nc.close();
  });

  it('the k8s command prints the same material as the Secrets k8s/ mounts, each workload only its own', async () => {
    const secrets = new Map<string, Record<string, string>>();
    for (const d of parseAllDocuments(run(initArgs('k8s')))) {
      const doc = d.toJS() as Any;
      expect(doc).toMatchObject({ apiVersion: 'v1', kind: 'Secret', metadata: { namespace: 'tern' } });
      secrets.set(doc.metadata.name, doc.stringData);
    }
    expect([...secrets.keys()].sort()).toEqual(['tern-nats-server', ...CONTROL_PLANE.map((s) => `tern-nats-${s}`)].sort());
    expect(secrets.get('tern-nats-server')!['server.conf']).toBe(readFileSync(join(dir, 'server', 'server.conf'), 'utf8'));
    expect(Object.keys(secrets.get('tern-nats-gateway')!).sort()).toEqual(['nats.creds', 'signer.json']);

    const workloads = readdirYaml(join(ROOT, 'k8s')).filter((w) => ['Deployment', 'StatefulSet'].includes(w.kind));
    const mountedSecret = (w: Any, path: string) => {
      const c = w.spec.template.spec.containers[0];
      const m = (c.volumeMounts as Any[]).find((v) => path.startsWith(`${v.mountPath}/`));
      const secret = (w.spec.template.spec.volumes as Any[]).find((v) => v.name === m?.name)?.secret;
      if (!secret) throw new Error(`${w.metadata.name} mounts no Secret at ${path}`);
      return { data: secrets.get(secret.secretName)!, file: path.slice(m.mountPath.length + 1) };
    };
    // NATS with the Secret's server.conf: the one this test's server runs.
    const nats = workloads.find((w) => w.metadata.name === 'nats');
    const args: string[] = nats.spec.template.spec.containers[0].args;
    const conf = mountedSecret(nats, args[args.indexOf('-c') + 1]);
    expect(conf.data[conf.file]).toBe(secrets.get('tern-nats-server')!['server.conf']);
    // Each service's NATS_CREDS is its own user, and it connects.
    for (const svc of CONTROL_PLANE) {
      const w = workloads.find((x) => x.metadata.name === svc);
      const env = w.spec.template.spec.containers[0].env as Any[];
      const creds = mountedSecret(w, env.find((e) => e.name === 'NATS_CREDS').value);
      expect(credsClaims(creds.data[creds.file]).name).toBe(`tern-${svc}`);
      const nc = await connect({ servers: url, reconnect: false, authenticator: credsAuthenticator(enc.encode(creds.data[creds.file])) });
      await nc.flush();
      await nc.close();
    }
  });
});

function readdirYaml(dir: string): Any[] {
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => d.toJS() as Any))
    .filter(Boolean);
}
