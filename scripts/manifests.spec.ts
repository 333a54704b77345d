import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { SERVICE_NAMES, VARIABLES } from '../libs/config/src/variables.js';

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

describe('docker-compose.yml', () => {
  const compose: Any = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true });
  const services: Record<string, Any> = compose.services;

  it('runs NATS with JetStream on a volume and Postgres 15 with a health check', () => {
    expect(services.nats.command).toContain('-js');
    expect(services.nats.volumes.join(' ')).toMatch(/:\/data/);
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

  it.each(SERVICE_NAMES)('health-checks %s on /health/live at its HTTP_PORT', (svc) => {
    const s = services[svc];
    const port = s.environment.HTTP_PORT;
    expect(Number(port)).toBeGreaterThan(0);
    expect(s.healthcheck.test.join(' ')).toContain(`127.0.0.1:${port}/health/live`);
  });

  it('publishes the gateway on 1994 with a bootstrap admin token from the environment', () => {
    expect(services.gateway.ports.some((p: string) => String(p).endsWith(':1994:1994') || p === '1994:1994')).toBe(true);
    expect(services.gateway.environment.BOOTSTRAP_ADMIN_TOKEN).toMatch(/^\$\{TERN_ADMIN_TOKEN:-.+\}$/);
  });

  it('runs the agent privileged as root with /dev and /run/runc from the host', () => {
    const agent = services.agent;
    expect(agent.privileged).toBe(true);
    expect(agent.user).toBe('root');
    expect(agent.volumes).toEqual(expect.arrayContaining(['/dev:/dev', '/run/runc:/run/runc']));
  });

  it('points the agent at the gateway with a token', () => {
    expect(services.agent.environment.AGENT_GATEWAY_URL).toBe('http://gateway:1994');
    expect(services.agent.environment.AGENT_TOKEN).toMatch(/TERN_ADMIN_TOKEN/);
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

  it.each(CONTROL_PLANE)('%s: a Deployment probing /health/live and /health/self on HTTP_PORT, and a Service', (svc) => {
    const dep = find('Deployment', svc);
    expect(dep).toBeDefined();
    const c = dep.spec.template.spec.containers[0];
    expect(c.command).toEqual(['node', `dist/apps/${svc}/src/main.js`]);
    expect(httpPort(c)).toBe(PORTS[svc]);
    expect(c.ports).toContainEqual({ name: 'http', containerPort: PORTS[svc] });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/health/live', port: 'http' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/health/self', port: 'http' });
    const service = find('Service', svc);
    expect(service.spec.selector).toEqual(dep.spec.selector.matchLabels);
    expect(service.spec.ports[0]).toMatchObject({ port: PORTS[svc], targetPort: 'http' });
  });

  it('the gateway Service listens on 1994', () => {
    expect(find('Service', 'gateway').spec.ports[0].port).toBe(1994);
  });

  it('the agent is a privileged DaemonSet on GPU nodes with /dev and /run/runc from the host', () => {
    const ds = find('DaemonSet', 'agent');
    const pod = ds.spec.template.spec;
    const c = pod.containers[0];
    expect(c.command).toEqual(['node', 'dist/apps/agent/src/main.js']);
    expect(c.securityContext.privileged).toBe(true);
    expect(pod.hostPID ?? false).toBe(false);
    expect(pod.nodeSelector).toEqual({ 'nvidia.com/gpu.present': 'true' });
    const hostPaths = pod.volumes.map((v: Any) => v.hostPath?.path);
    expect(hostPaths).toEqual(expect.arrayContaining(['/dev', '/run/runc']));
    const mounts = c.volumeMounts.map((m: Any) => m.mountPath);
    expect(mounts).toEqual(expect.arrayContaining(['/dev', '/run/runc']));
    expect(c.env).toContainEqual({ name: 'MACHINE_ID', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
    expect(c.env).toContainEqual({ name: 'AGENT_GATEWAY_URL', value: `http://gateway:${PORTS.gateway}` });
    expect(c.env.find((e: Any) => e.name === 'AGENT_TOKEN').valueFrom.secretKeyRef).toEqual({ name: 'tern-secrets', key: 'AGENT_TOKEN' });
  });

  it('NATS runs JetStream in a StatefulSet with a volume behind a headless Service', () => {
    const sts = find('StatefulSet', 'nats');
    expect(sts.spec.template.spec.containers[0].args).toContain('-js');
    expect(sts.spec.volumeClaimTemplates).toHaveLength(1);
    expect(find('Service', 'nats').spec.clusterIP).toBe('None');
    expect(find('ConfigMap', 'tern-config').data.NATS_URL).toBe('nats://nats:4222');
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
