import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getMetadataStorage } from 'class-validator';
import {
  DeploymentSpec,
  ExecRequest,
  ExposePortRequest,
  MachineKeepaliveRequest,
  MachineRegisterRequest,
  SandboxSpec,
  SnapshotRequest,
  StdinRequest,
} from '#tern/contracts';
import { ImageBuildRequest } from '../../apps/gateway/src/images/dto/image-build.request.js';
import { CreateMachineDto } from '../../apps/gateway/src/machines/dto/create-machine.dto.js';
import { CreateNatsUserDto } from '../../apps/gateway/src/nats-users/dto/create-nats-user.dto.js';
import { CreatePoolDto } from '../../apps/gateway/src/pools/dto/create-pool.dto.js';
import { UpdatePoolDto } from '../../apps/gateway/src/pools/dto/update-pool.dto.js';
import { PutSecretDto } from '../../apps/gateway/src/secrets/dto/secret.dto.js';
import { CreateTokenDto } from '../../apps/gateway/src/workspaces/dto/create-token.dto.js';
import { CreateVolumeDto, VolumeCommitDto } from '../../apps/gateway/src/volumes/dto/volume.dto.js';
import { CreateWorkspaceDto } from '../../apps/gateway/src/workspaces/dto/create-workspace.dto.js';
import { callGateway, runningGateway } from '../support/gateway.js';
import { describeNeeding } from '../support/real-parts.js';
import { pushTestBase, staticRegistryEnv, TestRegistry } from './support.js';

const describeRefs = await describeNeeding(['root', 'skopeo', 'docker-registry', 'debootstrap']);

const OPERATOR = `tern_${'r'.repeat(43)}`;

/** Every request body class of the OpenAPI document, by its schema name. */
const BODIES: Record<string, new () => object> = {
  CreateWorkspaceDto,
  CreateTokenDto,
  CreateNatsUserDto,
  CreatePoolDto,
  UpdatePoolDto,
  CreateMachineDto,
  MachineRegisterRequest,
  MachineKeepaliveRequest,
  PutSecretDto,
  DeploymentSpec,
  SandboxSpec,
  ExposePortRequest,
  SnapshotRequest,
  ExecRequest,
  StdinRequest,
  ImageBuildRequest,
  CreateVolumeDto,
  VolumeCommitDto,
};

/** The fields of a request body that name an image, a volume or a secret of the caller's workspace. */
const REFERENCE_FIELDS = ['image', 'base', 'volumes', 'registry_secret', 'secrets'];

interface Workspace {
  id: string;
  token: string;
  code: string;
}

/** What workspace A holds that B tries to name. */
interface Held {
  image: string;
  volume: string;
  secret: string;
}

/**
 * For every operation whose body can name an image, a volume or a secret: B's request naming
 * A's. Each must be refused with a 400 saying what to fix, and A's own request must get past the
 * same check (so that a check refusing everyone would fail here too).
 */
const ATTEMPTS: Record<string, { name: string; body: (own: Workspace, a: Held) => object; refusal: RegExp }[]> = {
  'POST /api/v1/images/builds': [
    {
      name: 'build base',
      body: (_, a) => ({ image: { base: a.image, commands: ['true'] } }),
      refusal: /image\.base: .*builds\/ holds each workspace's own builds/,
    },
  ],
  'POST /api/v1/deployments': [
    {
      name: 'deploy image',
      body: (own, a) => ({ name: 'taker', kind: 'endpoint', handler: 'app.py:f', code: own.code, image: a.image }),
      refusal: /image: .*builds\/ holds each workspace's own builds/,
    },
    {
      name: 'deploy volume',
      body: (own, a) => ({
        name: 'taker',
        kind: 'endpoint',
        handler: 'app.py:f',
        code: own.code,
        volumes: [{ name: a.volume, path: '/data' }],
      }),
      refusal: /volumes\[0\]\.name: volume a-weights not found/,
    },
    {
      name: 'deploy registry_secret',
      body: (own, a) => ({
        name: 'taker',
        kind: 'endpoint',
        handler: 'app.py:f',
        code: own.code,
        image: '127.0.0.1:1/team/model:1',
        registry_secret: a.secret,
      }),
      refusal: /registry_secret: .*a_registry/,
    },
    {
      name: 'deploy secrets',
      body: (own, a) => ({ name: 'taker', kind: 'endpoint', handler: 'app.py:f', code: own.code, secrets: [a.secret] }),
      refusal: /secrets: a_registry not found in workspace/,
    },
  ],
  'POST /api/v1/sandboxes': [
    {
      name: 'sandbox image',
      body: (_, a) => ({ cpu: 0.1, image: a.image }),
      refusal: /image: .*builds\/ holds each workspace's own builds/,
    },
    {
      name: 'sandbox volume',
      body: (_, a) => ({ cpu: 0.1, volumes: [{ name: a.volume, path: '/data' }] }),
      refusal: /volumes\[0\]\.name: volume a-weights not found/,
    },
  ],
};

describeRefs("references to another workspace's images, volumes and secrets", () => {
  let work: string;
  let registry: TestRegistry;
  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tern-refs-'));
    registry = await TestRegistry.start(join(work, 'registry'));
  }, 60_000);
  const env = staticRegistryEnv(() => registry, { SECRETS_KEY: randomBytes(32).toString('base64') });
  const gateway = runningGateway('refs', OPERATOR, env);
  afterAll(async () => {
    await registry?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  const call = (method: string, path: string, token: string, body?: unknown, contentType?: string) =>
    callGateway(gateway.base, method, path, token, body, { contentType });

  const workspace = async (name: string): Promise<Workspace> => {
    const made = await call('POST', '/api/v1/workspaces', OPERATOR, { name });
    expect(made.status).toBe(201);
    const bundle = Buffer.from(`code of ${name}`);
    const code = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    expect((await call('PUT', `/api/v1/code/${code}`, made.body.token, bundle, 'application/gzip')).status).toBe(201);
    return { id: made.body.workspace.id, token: made.body.token, code };
  };

  let a: Workspace;
  let b: Workspace;
  let held: Held;
  beforeAll(async () => {
    a = await workspace('refs-a');
    b = await workspace('refs-b');
    // A's private snapshot: pushed where a sandbox snapshot of A's lands.
    const image = (await pushTestBase(registry, `builds/${a.id}/snapshots/secret:1`)).ref;
    expect((await call('POST', '/api/v1/volumes', a.token, { name: 'a-weights' })).status).toBe(201);
    expect((await call('PUT', '/api/v1/secrets/a_registry', a.token, { value: 'robot:a-password' })).status).toBe(200);
    held = { image, volume: 'a-weights', secret: 'a_registry' };
  }, 300_000);

  it('names every operation whose body takes a reference', async () => {
    const doc = (await call('GET', '/docs-json', OPERATOR)).body as {
      paths: Record<string, Record<string, { requestBody?: { content?: Record<string, { schema?: { $ref?: string } }> } }>>;
    };
    const validated = getMetadataStorage();
    const taking: string[] = [];
    const unknown: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const { schema } of Object.values(op.requestBody?.content ?? {})) {
          const name = schema?.$ref?.split('/').pop();
          if (!name) continue;
          const body = BODIES[name];
          if (!body) {
            unknown.push(`${name} (${method.toUpperCase()} ${path})`);
            continue;
          }
          const fields = validated.getTargetValidationMetadatas(body, '', true, false).map((m) => m.propertyName);
          if (fields.some((f) => REFERENCE_FIELDS.includes(f))) taking.push(`${method.toUpperCase()} ${path}`);
        }
      }
    }
    // A new body class goes into BODIES, so that its fields are read here.
    expect(unknown).toEqual([]);
    expect(taking.sort()).toEqual(Object.keys(ATTEMPTS).sort());
  });

  it("refuses B's request naming A's image, volume or secret on every such route, with a 400 saying what to fix", async () => {
    const failures: string[] = [];
    for (const [route, attempts] of Object.entries(ATTEMPTS)) {
      const [method, path] = route.split(' ') as [string, string];
      for (const attempt of attempts) {
        const r = await call(method, path, b.token, attempt.body(b, held));
        const message = String(r.body?.message ?? r.text);
        if (r.status !== 400 || !attempt.refusal.test(message))
          failures.push(`${attempt.name}: ${r.status} ${message.slice(0, 200)} (expected 400 matching ${attempt.refusal})`);
        if (r.text.includes('a-password')) failures.push(`${attempt.name}: the answer holds A's secret`);
      }
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it('lets A name its own: the same requests get past the ownership check', async () => {
    for (const [route, attempts] of Object.entries(ATTEMPTS)) {
      const [method, path] = route.split(' ') as [string, string];
      for (const attempt of attempts) {
        const r = await call(method, path, a.token, attempt.body(a, held));
        const message = String(r.body?.message ?? r.text);
        expect({ attempt: attempt.name, refused: attempt.refusal.test(message) }).toEqual({ attempt: attempt.name, refused: false });
      }
    }
  }, 120_000);
});
