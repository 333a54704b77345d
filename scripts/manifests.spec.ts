import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { ConfigError, isPlaceholderSecret, loadConfig, PLACEHOLDER_SECRETS } from '../libs/config/src/config.js';
import { SERVICE_NAMES, type ServiceName, VARIABLES } from '../libs/config/src/variables.js';

/**
 * docker-compose.yml, Dockerfile and k8s/ against the one list of variables and the services'
 * real routes: a renamed variable or a probe on a path that does not exist fails here, not in
 * someone's cluster.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KNOWN = new Set<string>(VARIABLES.map((v) => v.name));
const CONTROL_PLANE = SERVICE_NAMES.filter((s) => s !== 'agent');
const PORTS: Record<string, number> = { gateway: 1994, scheduler: 1995, autoscaler: 1996, metering: 1997, reputation: 1998 };

type Any = any;

/** Why a service refuses to start with env, or 'started'. */
function refusal(service: ServiceName, env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(service, env);
  } catch (e) {
    return e instanceof ConfigError ? e.problems.join('\n') : String(e);
  }
  return 'started';
}

describe('docker-compose.yml', () => {
  const compose: Any = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true });
  const services: Record<string, Any> = compose.services;

  it('runs NATS with JetStream on a volume and Postgres 15 with a health check', () => {
    expect(services.nats.volumes).toContain('nats-data:/data');
    // JetStream's store and the resolver's account JWTs, as the nats-auth service writes them into server.conf.
    const init: string[] = services['nats-auth'].command;
    expect(init[init.indexOf('--store-dir') + 1]).toBe('/data');
    expect(init[init.indexOf('--resolver-dir') + 1]).toBe('/data/jwt');
    expect(services.postgres.image).toMatch(/^postgres:15/);
    expect(services.postgres.healthcheck.test.join(' ')).toContain('pg_isready');
    expect(Object.keys(compose.volumes)).toEqual(expect.arrayContaining(['nats-data', 'postgres-data']));
  });

  it.each(SERVICE_NAMES)('runs %s from the one image with its main.js', (svc) => {
    const s = services[svc];
    expect(s).toBeDefined();
    expect(s.image).toBe(services.gateway.image);
    expect(s.command).toEqual(['node', `dist/apps/${svc}/src/main.js`]);
  });

  it.each(SERVICE_NAMES)('sets only known variables on %s', (svc) => {
    const unknown = Object.keys(services[svc].environment ?? {}).filter((k) => !KNOWN.has(k));
    expect(unknown).toEqual([]);
  });

  it.each(SERVICE_NAMES)('health-checks %s on /health/live at its OPS_PORT, else its HTTP_PORT', (svc) => {
    const s = services[svc];
    const port = s.environment.OPS_PORT ?? s.environment.HTTP_PORT;
    expect(Number(port)).toBeGreaterThan(0);
    expect(s.healthcheck.test.join(' ')).toContain(`127.0.0.1:${port}/health/live`);
  });

  it('publishes the gateway on 1994 with a bootstrap admin token the operator must set', () => {
    expect(services.gateway.ports.some((p: string) => /:1994(-\d+)?:1994$/.test(String(p)))).toBe(true);
    expect(services.gateway.environment.BOOTSTRAP_ADMIN_TOKEN).toMatch(
      /^\$\{TERN_ADMIN_TOKEN:\?set TERN_ADMIN_TOKEN to a random secret.+\}$/,
    );
  });

  it('scales to two replicas of every control-plane service (--scale): no container_name, no fixed host port per replica', () => {
    for (const svc of Object.keys(PORTS)) {
      expect([svc, services[svc].container_name]).toEqual([svc, undefined]);
      for (const p of services[svc].ports ?? []) {
        const range = /:(\d+)-(\d+):\d+$/.exec(String(p));
        expect([svc, p, range && Number(range[2]) - Number(range[1]) >= 1]).toEqual([svc, p, true]);
      }
    }
  });

  it("keeps the gateway's /metrics and health off the published API port, on loopback", () => {
    const env = services.gateway.environment;
    expect(env.OPS_HOST).toBe('127.0.0.1');
    expect(Number(env.OPS_PORT)).toBeGreaterThan(0);
    expect(services.gateway.ports.join(' ')).not.toContain(`:${env.OPS_PORT}`);
  });

  it('has no default secret: each one is required with a message saying what to set', () => {
    const text = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
    for (const secret of ['TERN_ADMIN_TOKEN', 'POSTGRES_PASSWORD', 'TERN_SECRETS_KEY']) {
      expect(text).not.toMatch(new RegExp(`\\$\\{${secret}:?-`));
      expect(text).toMatch(new RegExp(`\\$\\{${secret}:\\?set ${secret} to a random secret`));
    }
    expect(services.postgres.environment.POSTGRES_PASSWORD).toMatch(/^\$\{POSTGRES_PASSWORD:\?/);
    expect(services.gateway.environment.DATABASE_URL).toMatch(/^postgres:\/\/tern:\$\{POSTGRES_PASSWORD:\?[^}]+\}@postgres:5432\/tern$/);
  });

  it('names no known placeholder secret anywhere', () => {
    const values = JSON.stringify(services).toLowerCase();
    for (const p of PLACEHOLDER_SECRETS.filter((p) => p.includes('-'))) expect(values).not.toContain(p);
    for (const s of Object.values(services)) {
      for (const [k, v] of Object.entries(s.environment ?? {})) {
        // A path to a key file, or the registry's token settings, is not itself a secret.
        if (/TOKEN|PASSWORD|SECRET/.test(k) && !/_FILE$|^REGISTRY_AUTH_TOKEN_/.test(k)) expect(`${k}=${String(v)}`).toMatch(/\$\{/);
      }
    }
  });

  it("runs a registry that takes only the gateway's tokens: the gateway mounts the key, the registry the certificate alone", () => {
    const registry = services.registry;
    expect(registry.image).toMatch(/^registry:2\.8/);
    expect(registry.environment).toMatchObject({
      REGISTRY_AUTH: 'token',
      REGISTRY_AUTH_TOKEN_SERVICE: 'tern-registry',
      REGISTRY_AUTH_TOKEN_ISSUER: 'tern',
      REGISTRY_AUTH_TOKEN_ROOTCERTBUNDLE: '/etc/tern-registry/token-cert.pem',
    });
    expect(registry.environment.REGISTRY_AUTH_TOKEN_REALM).toContain('http://gateway:1994/api/v1/registry/token');
    expect(registry.volumes).toEqual(['registry-auth-cert:/etc/tern-registry:ro', 'registry-data:/var/lib/registry']);
    const init: string[] = services['registry-auth'].command;
    expect(init.slice(0, 2)).toEqual(['node', 'scripts/registry-token-key.mjs']);
    const gateway = services.gateway;
    expect(gateway.environment.REGISTRY_URL).toBe('http://registry:5000');
    expect(gateway.volumes).toContain(`registry-auth-key:${dirname(gateway.environment.REGISTRY_TOKEN_KEY_FILE)}:ro`);
    expect(gateway.depends_on.registry.condition).toBe('service_healthy');
  });

  it('runs the agent privileged as root with /dev and /run/runc from the host', () => {
    const agent = services.agent;
    expect(agent.privileged).toBe(true);
    expect(agent.user).toBe('root');
    expect(agent.volumes).toEqual(expect.arrayContaining(['/dev:/dev', '/run/runc:/run/runc']));
  });

  it('points the agent at the gateway with its own join token, never the admin token, started on request', () => {
    const agent = services.agent;
    expect(agent.environment.AGENT_GATEWAY_URL).toBe('http://gateway:1994');
    expect(agent.environment.AGENT_TOKEN).toBe('${TERN_AGENT_TOKEN:-}');
    expect(JSON.stringify(agent)).not.toContain('TERN_ADMIN_TOKEN');
    // A required variable would stop `docker compose up` before a join token can exist: the
    // agent is in its own profile, and without a token it stops saying what to set.
    expect(agent.profiles).toEqual(['agent']);
    expect(refusal('agent', { AGENT_GATEWAY_URL: 'http://gateway:1994', AGENT_TOKEN: 'change-me' })).toContain(
      'AGENT_TOKEN is a published placeholder',
    );
  });

  /** Compose volume mounts of a service: { volume, target, readOnly }. */
  const mounts = (svc: string) =>
    ((services[svc].volumes ?? []) as string[]).map((v) => {
      const [volume, target, mode] = v.split(':');
      return { volume, target, readOnly: mode === 'ro' };
    });
  const natsAuthVolumes = (svc: string) => mounts(svc).filter((m) => m.volume.startsWith('nats-auth-'));

  it('writes the NATS operator material once, before NATS and every service, one volume per reader', () => {
    const init = services['nats-auth'];
    expect(init.image).toBe(services.gateway.image);
    expect(init.restart).toBe('no');
    const [node, script, command, dir] = init.command as string[];
    expect([node, script, command]).toEqual(['node', 'scripts/nats-auth.mjs', 'deploy']);
    // scripts/nats-auth.mjs deploy's layout: <dir>/operator, <dir>/server, <dir>/<service>.
    expect(mounts('nats-auth').map((m) => [m.volume, m.target])).toEqual(
      ['operator', 'server', ...CONTROL_PLANE].map((f) => [`nats-auth-${f}`, `${dir}/${f}`]),
    );
    for (const svc of ['nats', ...CONTROL_PLANE]) {
      expect(services[svc].depends_on['nats-auth']).toEqual({ condition: 'service_completed_successfully' });
    }
    expect(Object.keys(compose.volumes)).toEqual(expect.arrayContaining(mounts('nats-auth').map((m) => m.volume)));
  });

  it('starts NATS from the generated server.conf only (no seed, no service creds)', () => {
    expect(natsAuthVolumes('nats')).toEqual([{ volume: 'nats-auth-server', target: '/etc/tern-nats', readOnly: true }]);
    const cmd: string[] = services.nats.command;
    expect(cmd[cmd.indexOf('-c') + 1]).toBe('/etc/tern-nats/server.conf');
  });

  it.each(CONTROL_PLANE)("%s connects to NATS with its own creds, mounted read-only, and no other principal's", (svc) => {
    const env = services[svc].environment;
    expect(natsAuthVolumes(svc)).toEqual([{ volume: `nats-auth-${svc}`, target: expect.any(String), readOnly: true }]);
    const target = natsAuthVolumes(svc)[0].target;
    expect(env.NATS_CREDS).toBe(`${target}/nats.creds`);
    // Only the gateway holds the account signer, in its own folder.
    if (svc === 'gateway') expect(env.NATS_ACCOUNT_SIGNER).toBe(`${target}/signer.json`);
    else expect(env.NATS_ACCOUNT_SIGNER).toBeUndefined();
  });

  it('gives the agent and Postgres no NATS credentials (the agent gets its own user at registration)', () => {
    for (const svc of ['agent', 'postgres']) {
      expect(natsAuthVolumes(svc)).toEqual([]);
      expect(services[svc].environment.NATS_CREDS).toBeUndefined();
    }
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  it('builds one node:20-bookworm-slim image for every service', () => {
    expect(text).toMatch(/^FROM node:20-bookworm-slim AS build$/m);
    expect(text).toMatch(/RUN npm ci/);
    expect(text).toMatch(/npm run build/);
    expect(text).toMatch(/^CMD \["node", "dist\/apps\/gateway\/src\/main\.js"\]$/m);
  });
  it('leaves local state out of the build context', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist', '.tern', '.git']));
  });
});

describe('k8s/', () => {
  const dir = join(ROOT, 'k8s');
  const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f));
  const docs: { file: string; doc: Any }[] = [];
  for (const file of files) {
    for (const d of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
      const doc = d.toJS();
      if (doc) docs.push({ file, doc });
    }
  }
  const find = (kind: string, name: string) => docs.find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc;
  const workloads = docs.filter((d) => ['Deployment', 'DaemonSet', 'StatefulSet'].includes(d.doc.kind));
  const ternContainers = workloads.flatMap((w) =>
    (w.doc.spec.template.spec.containers as Any[]).filter((c) => String(c.image).startsWith('tern')).map((c) => ({ w, c })),
  );
  const httpPort = (c: Any) => Number(c.env.find((e: Any) => e.name === 'HTTP_PORT')?.value);

  it('kustomization lists every manifest in k8s/', () => {
    const kustomization = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'));
    expect([...kustomization.resources].sort()).toEqual(files.filter((f) => f !== 'kustomization.yaml').sort());
    expect(kustomization.namespace).toBe(find('Namespace', kustomization.namespace)?.metadata.name);
  });

  it('the config map holds only known variables', () => {
    const cm = find('ConfigMap', 'tern-config');
    const unknown = Object.keys(cm.data).filter((k) => !KNOWN.has(k));
    expect(unknown).toEqual([]);
  });

  it('Tern containers set only known variables, from existing config maps and secret keys', () => {
    expect(ternContainers.length).toBe(SERVICE_NAMES.length);
    for (const { c } of ternContainers) {
      for (const e of c.env ?? []) {
        expect(KNOWN.has(e.name) ? e.name : `${c.name}: unknown ${e.name}`).toBe(e.name);
        const ref = e.valueFrom?.secretKeyRef;
        if (ref) expect(Object.keys(find('Secret', ref.name)?.stringData ?? {})).toContain(ref.key);
      }
      for (const from of c.envFrom ?? []) expect(find('ConfigMap', from.configMapRef?.name)).toBeDefined();
    }
  });

  it('ships no usable secret: every value in tern-secrets is refused by the services that read it', () => {
    const secret = find('Secret', 'tern-secrets').stringData;
    expect(Object.keys(secret).sort()).toEqual(['BOOTSTRAP_ADMIN_TOKEN', 'DATABASE_URL', 'POSTGRES_PASSWORD', 'SECRETS_KEY']);
    expect(refusal('gateway', { SECRETS_KEY: secret.SECRETS_KEY })).toContain('SECRETS_KEY must be 32 random bytes in base64');
    expect(isPlaceholderSecret(secret.POSTGRES_PASSWORD)).toBe(true);
    expect(refusal('gateway', { BOOTSTRAP_ADMIN_TOKEN: secret.BOOTSTRAP_ADMIN_TOKEN })).toContain(
      'BOOTSTRAP_ADMIN_TOKEN is a published placeholder',
    );
    expect(refusal('gateway', { DATABASE_URL: secret.DATABASE_URL })).toContain('DATABASE_URL: its password is a published placeholder');
  });

  it('postgres refuses the shipped password before its entrypoint runs, saying what to set', () => {
    const c = find('StatefulSet', 'postgres').spec.template.spec.containers[0];
    expect(c.command.slice(0, 2)).toEqual(['sh', '-c']);
    const run = (password: string) =>
      spawnSync('sh', ['-c', c.command[2]], { env: { PATH: process.env.PATH, POSTGRES_PASSWORD: password }, encoding: 'utf8' });
    for (const placeholder of [find('Secret', 'tern-secrets').stringData.POSTGRES_PASSWORD, 'tern', '']) {
      const refused = run(placeholder);
      expect(refused.status).toBe(78);
      expect(refused.stderr).toContain('set it to a random secret');
    }
    // A real password reaches the image's entrypoint (absent here: sh's "not found").
    expect(run('9b1f0c7d2e4a6b8c').status).toBe(127);
  });

  it.each(CONTROL_PLANE)('%s: a Deployment probing /health/live and /health/self on HTTP_PORT, and a Service', (svc) => {
    const dep = find('Deployment', svc);
    expect(dep).toBeDefined();
    const c = dep.spec.template.spec.containers[0];
    expect(c.command).toEqual(['node', `dist/apps/${svc}/src/main.js`]);
    expect(httpPort(c)).toBe(PORTS[svc]);
    expect(c.ports).toContainEqual({ name: 'http', containerPort: PORTS[svc] });
    // The gateway's API faces users: its probes and metrics are on the ops port instead.
    const probed = svc === 'gateway' ? 'ops' : 'http';
    expect(c.livenessProbe.httpGet).toEqual({ path: '/health/live', port: probed });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/health/self', port: probed });
    const service = find('Service', svc);
    expect(service.spec.selector).toEqual(dep.spec.selector.matchLabels);
    expect(service.spec.ports[0]).toMatchObject({ port: PORTS[svc], targetPort: 'http' });
  });

  it.each(CONTROL_PLANE)('%s: two replicas, and a PodDisruptionBudget that keeps one through a drain', (svc) => {
    const dep = find('Deployment', svc);
    expect(dep.spec.replicas).toBeGreaterThanOrEqual(2);
    expect(dep.spec.strategy?.type).not.toBe('Recreate');
    const pdb = find('PodDisruptionBudget', svc);
    expect(pdb.apiVersion).toBe('policy/v1');
    expect(pdb.spec.minAvailable).toBe(1);
    expect(pdb.spec.selector.matchLabels).toEqual(dep.spec.selector.matchLabels);
  });

  it("runs a registry that takes only the gateway's tokens: the key in the gateway alone, the certificate in the registry", () => {
    const pod = find('Deployment', 'registry').spec.template.spec;
    const env = Object.fromEntries((pod.containers[0].env as Any[]).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      REGISTRY_AUTH: 'token',
      REGISTRY_AUTH_TOKEN_REALM: 'http://gateway:1994/api/v1/registry/token',
      REGISTRY_AUTH_TOKEN_SERVICE: 'tern-registry',
      REGISTRY_AUTH_TOKEN_ISSUER: 'tern',
      REGISTRY_AUTH_TOKEN_ROOTCERTBUNDLE: '/etc/tern-registry/token-cert.pem',
    });
    expect((pod.volumes as Any[]).map((v) => v.secret?.secretName).filter(Boolean)).toEqual(['tern-registry-token-cert']);
    expect(find('Service', 'registry').spec.ports[0].port).toBe(5000);
    const gateway = find('Deployment', 'gateway').spec.template.spec;
    const gatewayEnv = Object.fromEntries((gateway.containers[0].env as Any[]).map((e) => [e.name, e.value]));
    expect(gatewayEnv.REGISTRY_URL).toBe('http://registry:5000');
    const key = (gateway.volumes as Any[]).find((v) => v.secret?.secretName === 'tern-registry-token-key');
    const mount = (gateway.containers[0].volumeMounts as Any[]).find((m) => m.name === key.name);
    expect(gatewayEnv.REGISTRY_TOKEN_KEY_FILE).toBe(`${mount.mountPath}/token-key.pem`);
    expect(mount.readOnly).toBe(true);
    expect(readFileSync(join(ROOT, 'k8s', 'registry.yaml'), 'utf8')).toContain('node scripts/registry-token-key.mjs');
  });

  it('the gateway Service listens on 1994 only; probes and Prometheus use the ops port', () => {
    expect(find('Service', 'gateway').spec.ports.map((p: Any) => p.port)).toEqual([1994]);
    const pod = find('Deployment', 'gateway').spec.template;
    const c = pod.spec.containers[0];
    const opsPort = Number(c.env.find((e: Any) => e.name === 'OPS_PORT').value);
    expect(c.ports).toContainEqual({ name: 'ops', containerPort: opsPort });
    expect(c.startupProbe.httpGet.port).toBe('ops');
    expect(Number(pod.metadata.annotations['prometheus.io/port'])).toBe(opsPort);
  });

  it('the agent is a privileged DaemonSet on GPU nodes with /dev and /run/runc from the host', () => {
    const ds = find('DaemonSet', 'agent');
    const pod = ds.spec.template.spec;
    const c = pod.containers[0];
    expect(c.command.at(-1)).toMatch(/exec node dist\/apps\/agent\/src\/main\.js$/);
    expect(c.securityContext.privileged).toBe(true);
    expect(pod.hostPID ?? false).toBe(false);
    expect(pod.nodeSelector).toEqual({ 'nvidia.com/gpu.present': 'true' });
    const hostPaths = pod.volumes.map((v: Any) => v.hostPath?.path);
    expect(hostPaths).toEqual(expect.arrayContaining(['/dev', '/run/runc']));
    const mounts = c.volumeMounts.map((m: Any) => m.mountPath);
    expect(mounts).toEqual(expect.arrayContaining(['/dev', '/run/runc']));
    expect(c.env).toContainEqual({ name: 'MACHINE_ID', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
    expect(c.env).toContainEqual({ name: 'AGENT_GATEWAY_URL', value: `http://gateway:${PORTS.gateway}` });
  });

  it("agents join with their node's own join token, never the admin token", () => {
    const pod = find('DaemonSet', 'agent').spec.template.spec;
    const c = pod.containers[0];
    expect(c.env.find((e: Any) => e.name === 'AGENT_TOKEN')).toBeUndefined();
    expect(JSON.stringify(pod)).not.toContain('BOOTSTRAP_ADMIN_TOKEN');
    const volume = pod.volumes.find((v: Any) => v.secret?.secretName === 'tern-agent-join-tokens');
    expect(volume.secret.optional).toBe(true);
    expect(find('Secret', 'tern-agent-join-tokens')).toBeDefined();
    const mount = c.volumeMounts.find((m: Any) => m.name === volume.name);
    expect(c.command.at(-1)).toContain(`${mount.mountPath}/$MACHINE_ID`);
  });

  /** The Secret volume a workload mounts at the folder holding path, and the file's name in it. */
  const mountedSecret = (w: Any, path: string) => {
    const c = w.spec.template.spec.containers[0];
    const m = ((c.volumeMounts ?? []) as Any[]).find((v) => path.startsWith(`${v.mountPath}/`));
    const volume = ((w.spec.template.spec.volumes ?? []) as Any[]).find((v) => v.name === m?.name);
    return { secret: volume?.secret?.secretName, file: m ? path.slice(m.mountPath.length + 1) : undefined, readOnly: m?.readOnly, volume };
  };
  const natsSecrets = (w: Any) =>
    ((w.spec.template.spec.volumes ?? []) as Any[]).map((v) => v.secret?.secretName).filter((n) => String(n).startsWith('tern-nats-'));

  it('NATS runs JetStream in a StatefulSet with a volume behind a headless Service', () => {
    const sts = find('StatefulSet', 'nats');
    const args: string[] = sts.spec.template.spec.containers[0].args;
    // Operator mode from the server.conf that `node scripts/nats-auth.mjs k8s` puts in Secret tern-nats-server.
    expect(mountedSecret(sts, args[args.indexOf('-c') + 1])).toMatchObject({
      secret: 'tern-nats-server',
      file: 'server.conf',
      readOnly: true,
    });
    expect(natsSecrets(sts)).toEqual(['tern-nats-server']);
    expect(sts.spec.template.spec.containers[0].volumeMounts).toContainEqual({ name: 'data', mountPath: '/data' });
    expect(sts.spec.volumeClaimTemplates).toHaveLength(1);
    expect(find('Service', 'nats').spec.clusterIP).toBe('None');
  });

  it('NATS is a 3-node cluster, routes to every member, R3 streams, one server down at a time', () => {
    const sts = find('StatefulSet', 'nats');
    expect(sts.spec.replicas).toBe(3);
    expect(sts.spec.podManagementPolicy).toBe('Parallel');
    const args: string[] = sts.spec.template.spec.containers[0].args;
    const members = [0, 1, 2].map((i) => `nats-${i}.${sts.spec.serviceName}`);
    expect(args[args.indexOf('--routes') + 1].split(',')).toEqual(members.map((m) => `nats://${m}:6222`));
    expect(args[args.indexOf('-n') + 1]).toBe('$(POD_NAME)');
    const ports = (find('Service', 'nats').spec.ports as Any[]).map((p) => [p.name, p.port]);
    expect(ports).toEqual(
      expect.arrayContaining([
        ['client', 4222],
        ['cluster', 6222],
        ['leafnodes', 7422],
      ]),
    );
    const config = find('ConfigMap', 'tern-config').data;
    expect(config.NATS_URL.split(',')).toEqual(members.map((m) => `nats://${m}:4222`));
    expect(refusal('scheduler', { ...config, DATABASE_URL: 'postgres://x@y/z' })).toBe('started');
    expect(config.NATS_REPLICAS).toBe('3');
    expect(find('PodDisruptionBudget', 'nats').spec).toMatchObject({ maxUnavailable: 1, selector: sts.spec.selector });
  });

  it.each(CONTROL_PLANE)("%s connects to NATS with its own creds from its Secret tern-nats-<service>, and no other principal's", (svc) => {
    const dep = find('Deployment', svc);
    const env = dep.spec.template.spec.containers[0].env as Any[];
    const value = (name: string) => env.find((e) => e.name === name)?.value as string | undefined;
    const creds = mountedSecret(dep, value('NATS_CREDS') ?? '');
    expect(creds).toMatchObject({ secret: `tern-nats-${svc}`, file: 'nats.creds', readOnly: true });
    expect(natsSecrets(dep)).toEqual([`tern-nats-${svc}`]);
    if (svc === 'gateway')
      expect(mountedSecret(dep, value('NATS_ACCOUNT_SIGNER') ?? '')).toMatchObject({ secret: 'tern-nats-gateway', file: 'signer.json' });
    else expect(value('NATS_ACCOUNT_SIGNER')).toBeUndefined();
    // Readable by the pod's user (1000) through its group, by nobody else.
    const pod = dep.spec.template.spec;
    expect(pod.securityContext).toMatchObject({ runAsUser: 1000, fsGroup: 1000 });
    expect(creds.volume.secret.defaultMode).toBe(0o440);
  });

  it('the agent mounts no NATS credentials (it gets its own user at registration)', () => {
    const ds = find('DaemonSet', 'agent');
    expect(natsSecrets(ds)).toEqual([]);
    expect(ds.spec.template.spec.containers[0].env.find((e: Any) => e.name === 'NATS_CREDS')).toBeUndefined();
    expect(find('ConfigMap', 'tern-config').data.NATS_CREDS).toBeUndefined();
  });

  it('names the one-time command that writes the NATS Secrets, which kustomize does not overwrite', () => {
    const text = readFileSync(join(dir, 'kustomization.yaml'), 'utf8');
    expect(text).toContain('node scripts/nats-auth.mjs k8s ./tern-nats-auth | kubectl apply -f -');
    expect(docs.filter((d) => String(d.doc.metadata?.name).startsWith('tern-nats-'))).toEqual([]);
  });

  it('Postgres runs in a StatefulSet with a volume, and its URL is a secret', () => {
    const sts = find('StatefulSet', 'postgres');
    expect(sts.spec.template.spec.containers[0].image).toMatch(/^postgres:15/);
    expect(sts.spec.volumeClaimTemplates).toHaveLength(1);
    expect(find('Service', 'postgres').spec.ports[0].port).toBe(5432);
    expect(find('Secret', 'tern-secrets').stringData.DATABASE_URL).toMatch(/^postgres:\/\/.+@postgres:5432\//);
    expect(find('ConfigMap', 'tern-config').data.DATABASE_URL).toBeUndefined();
  });
});

describe('package-lock.json', () => {
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { optionalDependencies?: Record<string, string> }>;
  };

  // npm ci's sync check wants every optional dependency in the lock, other platforms' too. A
  // registry that lacks some platforms' packages (this project's CI registry lacks darwin and
  // win32 builds) writes a lock without them, and npm ci then refuses it on a fresh clone.
  it('lists every optional dependency of every locked package, so npm ci accepts it', () => {
    const missing: string[] = [];
    for (const [path, pkg] of Object.entries(lock.packages)) {
      for (const name of Object.keys(pkg.optionalDependencies ?? {})) {
        if (!resolves(path, name)) missing.push(`${name} (for ${path || 'the root'})`);
      }
    }
    expect(missing).toEqual([]);
  });

  /** Node's lookup: the package's own node_modules, then each enclosing one up to the root's. */
  function resolves(from: string, name: string): boolean {
    for (let dir = from; ;) {
      if (lock.packages[`${dir ? `${dir}/` : ''}node_modules/${name}`]) return true;
      if (!dir) return false;
      const up = dir.lastIndexOf('/node_modules/');
      dir = up < 0 ? '' : dir.slice(0, up);
    }
  }
});
