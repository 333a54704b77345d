import 'reflect-metadata';
import { validatePayload } from '#tern/messaging';
import { DeploymentSpec } from './deployment-spec.js';
import { endpointLimits, parseMemory, resolveSpec, SpecError } from './resolved-spec.js';
import { nextTick, ticksBetween } from './schedule.js';

const base = { name: 'hello', kind: 'endpoint', handler: 'app.py:predict', code: `sha256:${'a'.repeat(64)}` } as const;

function resolve(extra: Record<string, unknown>) {
  return resolveSpec({ ...base, ...extra } as unknown as DeploymentSpec);
}

function specError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof SpecError) return e.message;
    throw e;
  }
  throw new Error('no SpecError');
}

describe('resolveSpec', () => {
  it('takes verify.sample in (0, 1] on kinds that run tasks, saying what to fix otherwise', async () => {
    expect(resolve({ kind: 'task_queue', verify: { sample: 0.02 } }).verify).toEqual({ sample: 0.02 });
    expect(resolve({ kind: 'function', verify: { sample: 1 } }).verify).toEqual({ sample: 1 });
    expect(resolve({ kind: 'task_queue' }).verify).toBeUndefined();
    expect(specError(() => resolve({ verify: { sample: 0.5 } }))).toMatch(/^verify checks task results: only task_queue and function/);
    for (const [sample, why] of [
      [0, /verify.sample must be above 0/],
      [-0.1, /verify.sample must be above 0/],
      [1.5, /verify.sample must be at most 1/],
      ['all', /verify.sample must be a number/],
    ] as const) {
      const bad = await validatePayload(DeploymentSpec, { ...base, kind: 'task_queue', verify: { sample } });
      expect(bad.ok ? '' : bad.reason).toMatch(why);
    }
    expect((await validatePayload(DeploymentSpec, { ...base, kind: 'task_queue', verify: { sample: 1 } })).ok).toBe(true);
  });

  it('mounts each volume once at its own directory, refusing the root, dot segments and doubles', () => {
    expect(
      resolve({
        volumes: [
          { name: 'w', path: '/models/', mode: 'ro' },
          { name: 'd', mount_path: '/data' },
        ],
      }).volumes,
    ).toEqual([
      { name: 'w', mountPath: '/models', readOnly: true },
      { name: 'd', mountPath: '/data', readOnly: false },
    ]);
    expect(specError(() => resolve({ volumes: [{ name: 'w', path: '/' }] }))).toMatch(
      /volumes\[0\]\.path must be a directory inside the container, not its root/,
    );
    expect(specError(() => resolve({ volumes: [{ name: 'w', path: '/a/../etc' }] }))).toMatch(/without "\." or "\.\." segments/);
    expect(
      specError(() =>
        resolve({
          volumes: [
            { name: 'w', path: '/a' },
            { name: 'w', path: '/b' },
          ],
        }),
      ),
    ).toMatch(/volumes\[1\]\.name mounts volume w a second time/);
    expect(
      specError(() =>
        resolve({
          volumes: [
            { name: 'w', path: '/a' },
            { name: 'x', path: '/a/' },
          ],
        }),
      ),
    ).toMatch(/volumes\[1\]\.path is the mount path of another volume/);
  });

  it('fills the defaults users of Beam expect', () => {
    const r = resolve({});
    expect(r).toMatchObject({
      image: 'host',
      cpuMillicores: 1000,
      memoryBytes: 512 * 2 ** 20,
      gpuTypes: [],
      gpuCount: 0,
      workers: 1,
      concurrentRequests: 1,
      keepWarmSeconds: 180,
      timeoutSeconds: 180,
      pool: 'default',
      autoscaler: { type: 'queue_depth', minContainers: 0, maxContainers: 1, tasksPerContainer: 1 },
    });
    expect(resolve({ kind: 'task_queue' }).keepWarmSeconds).toBe(10);
  });

  it('gives functions a task policy like task queues, and refuses one on an endpoint', () => {
    const f = resolve({ kind: 'function', task_policy: { max_retries: 1, timeout: 30 } });
    expect(f.keepWarmSeconds).toBe(10);
    expect(f.taskPolicy).toMatchObject({ maxRetries: 1, timeoutSeconds: 30 });
    expect(resolve({ kind: 'function' }).taskPolicy).toMatchObject({ timeoutSeconds: 3600 });
    expect(resolve({}).taskPolicy).toBeUndefined();
    expect(specError(() => resolve({ task_policy: { max_retries: 1 } }))).toBe(
      'task_policy applies to task_queue and function deployments only (this is a endpoint)',
    );
  });

  it('names the errors a task policy does not retry, once each, and validates them as type names', async () => {
    const f = resolve({ kind: 'task_queue', task_policy: { no_retry_on: ['ValueError', 'app.BadInput', 'ValueError'] } });
    expect(f.taskPolicy?.noRetryOn).toEqual(['ValueError', 'app.BadInput']);
    expect(resolve({ kind: 'task_queue' }).taskPolicy?.noRetryOn).toBeUndefined();
    const bad = await validatePayload(DeploymentSpec, {
      ...base,
      kind: 'task_queue',
      task_policy: { no_retry_on: ['ValueError', 'not a type'] },
    });
    expect(bad.ok ? '' : bad.reason).toMatch(/task_policy.no_retry_on must list error type names/);
  });

  it('gives an endpoint limits that fit streams: until the response starts, between pieces, in all', () => {
    expect(resolve({})).toMatchObject({ timeoutSeconds: 180, idleTimeoutSeconds: 60, maxDurationSeconds: 3600 });
    expect(endpointLimits(resolve({ timeout: 30, idle_timeout: 5, max_duration: 7200 }))).toEqual({
      firstByteMs: 30_000,
      idleMs: 5_000,
      totalMs: 7_200_000,
    });
    // A total below the time allowed to start is no total at all: the start's limit wins.
    expect(endpointLimits(resolve({ timeout: 600, max_duration: 60 })).totalMs).toBe(600_000);
    // A record stored before these fields existed gets the defaults.
    const { idleTimeoutSeconds: _i, maxDurationSeconds: _m, ...old } = resolve({});
    expect(endpointLimits(old)).toEqual({ firstByteMs: 180_000, idleMs: 60_000, totalMs: 3_600_000 });
    expect(resolve({ kind: 'task_queue' }).idleTimeoutSeconds).toBeUndefined();
    expect(specError(() => resolve({ kind: 'function', idle_timeout: 5 }))).toBe(
      'idle_timeout applies to endpoint deployments only (this is a function)',
    );
  });

  it('derives per-container load from workers and concurrency unless given', () => {
    expect(resolve({ workers: 2, concurrent_requests: 4 }).autoscaler.tasksPerContainer).toBe(8);
    expect(resolve({ autoscaler: { type: 'queue_depth', tasks_per_container: 30, max_containers: 5 } }).autoscaler).toMatchObject({
      tasksPerContainer: 30,
      maxContainers: 5,
    });
    expect(resolve({ autoscaler: { type: 'request_latency', desired_latency: 30, max_containers: 5 } }).autoscaler).toMatchObject({
      type: 'request_latency',
      desiredLatencySeconds: 30,
    });
  });

  it('reads GPU requests as a preference list, "any" meaning no preference', () => {
    expect(resolve({ gpu: 'A100' })).toMatchObject({ gpuTypes: ['A100'], gpuCount: 1 });
    expect(resolve({ gpu: ['H100', 'A100'], gpu_count: 2 })).toMatchObject({ gpuTypes: ['H100', 'A100'], gpuCount: 2 });
    expect(resolve({ gpu: 'any' })).toMatchObject({ gpuTypes: [], gpuCount: 1 });
  });

  it('names the field and the rule it breaks', () => {
    expect(specError(() => resolveSpec({ name: 'x', kind: 'endpoint' } as DeploymentSpec))).toMatch(/^handler or command is required/);
    expect(specError(() => resolve({ command: ['python3', 'serve.py'] }))).toMatch(/^command cannot be given together with handler/);
    expect(specError(() => resolve({ code: undefined }))).toMatch(/^code is required with a handler/);
    expect(specError(() => resolve({ autoscaler: { type: 'queue_depth', min_containers: 3, max_containers: 2 } }))).toBe(
      'autoscaler.min_containers must not exceed max_containers (2)',
    );
    expect(specError(() => resolve({ gpu: 'A100', gpu_count: 0 }))).toMatch(/^gpu_count must be at least 1/);
    expect(specError(() => resolve({ memory: 'lots' }))).toMatch(/^memory must be a size like 512Mi/);
  });
});

describe("resolveSpec: a command server's readiness check", () => {
  const server = (extra: Record<string, unknown>) =>
    resolve({ handler: undefined, code: undefined, command: ['python3', 'server.py'], ...extra });

  it('probes GET /health by default, another path with health_path, or a TCP connection with health_check tcp', () => {
    expect(server({}).healthCheck).toBeUndefined();
    expect(server({ health_path: '/health' }).healthCheck).toBeUndefined();
    expect(server({ health_path: '/v1/models' }).healthCheck).toBe('/v1/models');
    expect(server({ health_check: 'http', health_path: '/ready' }).healthCheck).toBe('/ready');
    expect(server({ health_check: 'tcp' }).healthCheck).toBe('tcp');
    // A model server loading weights may take longer than the default 120 s.
    expect(server({ startup_timeout: 900 }).startupTimeoutSeconds).toBe(900);
    expect(server({}).startupTimeoutSeconds).toBeUndefined();
  });

  it('refuses them with a handler (its runner answers /health) and a path with tcp', () => {
    expect(specError(() => resolve({ health_path: '/ready' }))).toMatch(/^health_path applies to command servers/);
    expect(specError(() => resolve({ health_check: 'tcp' }))).toMatch(/^health_check applies to command servers/);
    expect(specError(() => server({ health_check: 'tcp', health_path: '/ready' }))).toBe(
      'health_path applies to health_check http, not tcp',
    );
  });

  it('validates the fields themselves', async () => {
    const result = await validatePayload(DeploymentSpec, { ...base, health_check: 'grpc', health_path: 'ready me' });
    expect(result.ok).toBe(false);
    const reason = result.ok ? '' : result.reason;
    expect(reason).toMatch(/health_check must be http or tcp/);
    expect(reason).toMatch(/health_path must be a path starting with \//);
  });
});

describe('resolveSpec: secrets as environment', () => {
  it('keeps the names once each, never with an env entry of the same name or a variable Tern sets', async () => {
    expect(resolve({ secrets: ['HF_TOKEN', 'DB_URL', 'HF_TOKEN'] }).secrets).toEqual(['HF_TOKEN', 'DB_URL']);
    expect(resolve({}).secrets).toBeUndefined();
    expect(specError(() => resolve({ secrets: ['HF_TOKEN'], env: { HF_TOKEN: 'x' } }))).toBe(
      'secrets HF_TOKEN is also set in env: give it one source',
    );
    expect(specError(() => resolve({ secrets: ['PORT'] }))).toMatch(/^secrets PORT is set by Tern itself/);
    expect(specError(() => resolve({ secrets: ['TERN_HANDLER'] }))).toMatch(/^secrets TERN_HANDLER is set by Tern itself/);
    const bad = await validatePayload(DeploymentSpec, { ...base, secrets: ['hf-token'] });
    expect(bad.ok ? '' : bad.reason).toMatch(/secrets must name workspace secrets whose names are environment variable names/);
  });
});

describe('parseMemory', () => {
  it.each([
    ['512Mi', 512 * 2 ** 20],
    ['2Gi', 2 * 2 ** 30],
    ['1.5G', 1.5e9],
    ['256', 256 * 2 ** 20],
    [1024, 1024 * 2 ** 20],
  ])('%s', (input, bytes) => expect(parseMemory(input)).toBe(bytes));

  it('refuses sizes too small to run anything', () => {
    expect(() => parseMemory('1Mi')).toThrow('memory must be at least 16Mi');
  });
});

describe('DeploymentSpec validation', () => {
  it('rejects a bad name, handler form and policy, naming each field', async () => {
    const result = await validatePayload(DeploymentSpec, {
      name: 'Hello World',
      kind: 'endpoint',
      handler: 'app.py',
      autoscaler: { type: 'queue_depth', max_containers: 0 },
    });
    expect(result.ok).toBe(false);
    const reason = result.ok ? '' : result.reason;
    expect(reason).toMatch(/name: name must be 1-63 lower-case/);
    expect(reason).toMatch(/handler: handler must look like app.py:predict/);
    expect(reason).toMatch(/autoscaler.max_containers: max_containers must not be less than 1/);
  });

  it("takes a Python class's method as the handler (the runner makes the class once per container), not a Node one's", async () => {
    const handler = async (h: string) => {
      const result = await validatePayload(DeploymentSpec, { name: 'hello', kind: 'endpoint', handler: h });
      return result.ok ? 'ok' : result.reason;
    };
    for (const ok of ['app.py:Embedder.run', 'pkg/app.py:Model.__call__', 'app.py:predict', 'app.mjs:predict', 'app.js:$x']) {
      expect(await handler(ok)).toBe('ok');
    }
    for (const bad of ['app.py:Embedder.run.more', 'app.py:Embedder.', 'app.mjs:Embedder.run', 'app.py:.run']) {
      expect(await handler(bad)).toMatch(/handler must look like app.py:predict, app.py:Model.predict or app.js:predict/);
    }
  });
});

describe('resolveSpec: task queues and the predictive policy', () => {
  it('keeps task-queue containers warm 10 s unless keep_warm_seconds is given; endpoints keep 180 s', () => {
    expect(resolve({ kind: 'task_queue' }).keepWarmSeconds).toBe(10);
    expect(resolve({ kind: 'task_queue', keep_warm_seconds: 0 }).keepWarmSeconds).toBe(0);
    expect(resolve({ kind: 'task_queue', keep_warm_seconds: 300 }).keepWarmSeconds).toBe(300);
    expect(resolve({ kind: 'endpoint' }).keepWarmSeconds).toBe(180);
  });

  it('fills the predictive knobs with their defaults', () => {
    expect(resolve({ workers: 4, autoscaler: { type: 'predictive', max_containers: 8 } }).autoscaler).toEqual({
      type: 'predictive',
      minContainers: 0,
      maxContainers: 8,
      tasksPerContainer: 4,
      desiredLatencySeconds: 10,
      targetUtilization: 0.8,
      stableWindowSeconds: 60,
      panicWindowSeconds: 6,
      prewarm: true,
    });
  });

  it('takes the predictive knobs given', () => {
    const spec = {
      type: 'predictive',
      tasks_per_container: 2,
      desired_latency: 5,
      target_utilization: 0.6,
      stable_window: 120,
      panic_window: 10,
      prewarm: false,
    };
    expect(resolve({ autoscaler: spec }).autoscaler).toMatchObject({
      tasksPerContainer: 2,
      desiredLatencySeconds: 5,
      targetUtilization: 0.6,
      stableWindowSeconds: 120,
      panicWindowSeconds: 10,
      prewarm: false,
    });
  });

  it('names the field when a knob breaks a rule that spans two', () => {
    expect(specError(() => resolve({ autoscaler: { type: 'predictive', stable_window: 30, panic_window: 40 } }))).toBe(
      'autoscaler.panic_window must not exceed stable_window (30)',
    );
    expect(specError(() => resolve({ autoscaler: { type: 'reactive' } }))).toBe(
      'autoscaler.type must be one of queue_depth, request_latency, predictive, concurrency',
    );
  });

  it('validates predictive knobs naming each field', async () => {
    const result = await validatePayload(DeploymentSpec, {
      ...base,
      autoscaler: { type: 'predictive', target_utilization: 1.5, stable_window: 5, panic_window: 0, prewarm: 'yes', desired_latency: 0 },
    });
    expect(result.ok).toBe(false);
    const reason = result.ok ? '' : result.reason;
    expect(reason).toMatch(/autoscaler.target_utilization: target_utilization must not be greater than 1/);
    expect(reason).toMatch(/autoscaler.stable_window: stable_window must not be less than 10/);
    expect(reason).toMatch(/autoscaler.panic_window: panic_window must not be less than 1/);
    expect(reason).toMatch(/autoscaler.prewarm: prewarm must be a boolean value/);
    expect(reason).toMatch(/autoscaler.desired_latency: desired_latency must not be less than 0.01/);
  });

  it('fills target_concurrency with what a container holds, and takes a lower one', () => {
    expect(resolve({ workers: 2, concurrent_requests: 4, autoscaler: { type: 'concurrency', max_containers: 5 } }).autoscaler).toEqual({
      type: 'concurrency',
      minContainers: 0,
      maxContainers: 5,
      tasksPerContainer: 8,
      desiredLatencySeconds: undefined,
      targetConcurrency: 8,
    });
    expect(
      resolve({ concurrent_requests: 4, autoscaler: { type: 'concurrency', target_concurrency: 2, min_containers: 1, max_containers: 3 } })
        .autoscaler,
    ).toMatchObject({ type: 'concurrency', minContainers: 1, maxContainers: 3, targetConcurrency: 2 });
  });

  it('refuses a target_concurrency above what a container holds, saying what to change', () => {
    expect(specError(() => resolve({ concurrent_requests: 4, autoscaler: { type: 'concurrency', target_concurrency: 5 } }))).toBe(
      'autoscaler.target_concurrency must not exceed what one container holds at once, workers × concurrent_requests (4): raise concurrent_requests or lower the target',
    );
    expect(specError(() => resolve({ autoscaler: { type: 'concurrency', min_containers: 4, max_containers: 3 } }))).toBe(
      'autoscaler.min_containers must not exceed max_containers (3)',
    );
  });

  it.each([
    [0, /autoscaler.target_concurrency: target_concurrency must not be less than 1/],
    [1.5, /autoscaler.target_concurrency: target_concurrency must be an integer number/],
    ['2', /autoscaler.target_concurrency: target_concurrency must be an integer number/],
  ])('refuses target_concurrency %p with a reason naming the field', async (target_concurrency, why) => {
    const result = await validatePayload(DeploymentSpec, { ...base, autoscaler: { type: 'concurrency', target_concurrency } });
    expect(result.ok ? '' : result.reason).toMatch(why);
  });

  it('refuses target_concurrency on another policy', async () => {
    const result = await validatePayload(DeploymentSpec, { ...base, autoscaler: { type: 'queue_depth', target_concurrency: 2 } });
    expect(result.ok ? '' : result.reason).toMatch(/target_concurrency should not exist/);
    expect((await validatePayload(DeploymentSpec, { ...base, autoscaler: { type: 'concurrency', target_concurrency: 1 } })).ok).toBe(true);
  });

  it('reads the load probe of target_load, /load by default', () => {
    const withLoad = resolve({ autoscaler: { type: 'concurrency', target_load: 8, max_containers: 4 } });
    expect(withLoad.autoscaler).toMatchObject({ type: 'concurrency', targetConcurrency: 1, targetLoad: 8 });
    expect(withLoad.loadProbe).toEqual({ path: '/load' });
    const vllm = resolve({
      autoscaler: { type: 'concurrency', target_load: 4, load_path: '/metrics', load_metric: 'vllm:num_requests_waiting' },
    });
    expect(vllm.loadProbe).toEqual({ path: '/metrics', metric: 'vllm:num_requests_waiting' });
    expect(resolve({ autoscaler: { type: 'concurrency' } }).loadProbe).toBeUndefined();
    expect(resolve({ autoscaler: { type: 'concurrency' } }).autoscaler).not.toHaveProperty('targetLoad');
  });

  it('refuses a load_path or load_metric without target_load, saying what is missing', () => {
    expect(specError(() => resolve({ autoscaler: { type: 'concurrency', load_path: '/load' } }))).toBe(
      'autoscaler.load_path needs target_load: the load one container should carry',
    );
    expect(specError(() => resolve({ autoscaler: { type: 'concurrency', load_metric: 'queue_size' } }))).toBe(
      'autoscaler.load_metric needs target_load: the load one container should carry',
    );
  });

  it.each([
    [{ target_load: 0 }, /autoscaler.target_load: target_load must not be less than 0.001/],
    [{ target_load: 2_000_000 }, /autoscaler.target_load: target_load must not be greater than 1000000/],
    [{ target_load: 'many' }, /autoscaler.target_load: target_load must be a number/],
    [{ target_load: 1, load_path: 'load' }, /load_path must be a path starting with \/ \(e.g. \/load or \/metrics\)/],
    [{ target_load: 1, load_path: '/lo ad' }, /load_path must be a path starting with \//],
    [{ target_load: 1, load_metric: 'vllm num' }, /load_metric must be a Prometheus metric name/],
  ])('refuses %p with a reason naming the field', async (fields, why) => {
    const result = await validatePayload(DeploymentSpec, { ...base, autoscaler: { type: 'concurrency', ...fields } });
    expect(result.ok ? '' : result.reason).toMatch(why);
  });

  it('accepts a predictive spec with no knobs', async () => {
    expect((await validatePayload(DeploymentSpec, { ...base, autoscaler: { type: 'predictive' } })).ok).toBe(true);
  });

  it.each([
    ['oci:/etc', 'image: image cannot name a path on the worker (oci:<path>)'],
    ['oci:../../x', 'image: image cannot name a path on the worker (oci:<path>)'],
    ['/usr', 'image: image "/usr" is not a registry reference: "" is not a registry host'],
    ['python:3.12', 'image: image "python:3.12" names no registry'],
    ['registry.example.com/Team/model:1', 'is not a registry reference: repository part "Team" must be lower-case'],
    ['registry.example.com/team/model', 'names no tag and no digest'],
    ['registry.example.com/team/model@sha256:abc', 'digest "sha256:abc" is not sha256:<64 lower-case hex digits>'],
    [42, 'image must be "host", a registry reference'],
  ])('refuses image %s with a 400 reason saying what is wrong', async (image, reason) => {
    const result = await validatePayload(DeploymentSpec, { ...base, image });
    expect(result.ok).toBe(false);
    expect(result.ok ? '' : result.reason).toContain(reason);
  });

  it.each(['registry.example.com/team/model:1.2', `127.0.0.1:5000/tern/base@sha256:${'a'.repeat(64)}`, 'localhost:5000/a/b_c-d:v1'])(
    'accepts the registry reference %s',
    async (image) => {
      expect((await validatePayload(DeploymentSpec, { ...base, image })).ok).toBe(true);
    },
  );

  it('validates a build field by field, naming each field and its rule', async () => {
    const build = {
      base: 'tern',
      apt: ['python3-numpy', 'libgomp1=12.2.0-14'],
      pip: ['requests==2.32.3'],
      npm: ['lodash@4', '@scope/x@^1.2'],
    };
    expect(
      (
        await validatePayload(DeploymentSpec, {
          ...base,
          image: { ...build, commands: ['echo built > /opt/marker'], env: { HF_HOME: '/models' }, workdir: '/app' },
        })
      ).ok,
    ).toBe(true);
    const bad = await validatePayload(DeploymentSpec, {
      ...base,
      image: {
        base: 'debian:bookworm',
        env: { 'BAD-NAME': 'x' },
        apt: ['Python3 numpy'],
        pip: ['git+https://x'],
        npm: ['BAD NAME'],
        workdir: 'app',
        colour: 'red',
      },
    });
    expect(bad.ok).toBe(false);
    const reason = bad.ok ? '' : bad.reason;
    expect(reason).toContain('image.apt: apt must list Debian package names');
    expect(reason).toContain('image.pip: pip must list requirements');
    expect(reason).toContain('image.npm: npm must list packages');
    expect(reason).toContain('image.workdir: workdir must be an absolute path');
    expect(reason).toContain('image.colour is not a build field');
    expect(reason).toContain('image.env: "BAD-NAME" is not a variable name');
    expect(reason).toContain('image.base: "debian:bookworm" names no registry');
  });

  it('refuses to resolve a build (the CLI builds it and sends the reference), saying so', () => {
    expect(specError(() => resolve({ image: { apt: ['python3-numpy'] } }))).toMatch(
      /^image builds .* are made by tern deploy or tern image build/,
    );
  });

  it('accepts the host image, named or by default', async () => {
    expect((await validatePayload(DeploymentSpec, { ...base, image: 'host' })).ok).toBe(true);
    expect((await validatePayload(DeploymentSpec, { ...base })).ok).toBe(true);
  });
});

describe('network policy', () => {
  it('validates the CIDRs of allow, naming the field', async () => {
    const bad = await validatePayload(DeploymentSpec, {
      ...base,
      network: { allow: ['203.0.113.0/24', '10.0.0.1/8', 'example.com', '::1/128'] },
    });
    const reason = bad.ok ? '' : bad.reason;
    expect(reason).toContain('network.allow: allow must hold IPv4 CIDRs such as 203.0.113.0/24: "10.0.0.1/8" has host bits set');
    expect((await validatePayload(DeploymentSpec, { ...base, network: { block: 'yes' } })).ok).toBe(false);
    expect((await validatePayload(DeploymentSpec, { ...base, network: { allow: ['203.0.113.0/24', '198.51.100.7'] } })).ok).toBe(true);
  });

  it('resolves to block or allow, never both; absent means the public internet', () => {
    expect(resolve({}).network).toBeUndefined();
    expect(resolve({ network: { block: false } }).network).toBeUndefined();
    expect(resolve({ network: { block: true } }).network).toEqual({ block: true });
    expect(resolve({ network: { allow: ['203.0.113.0/24'] } }).network).toEqual({ allow: ['203.0.113.0/24'] });
    expect(specError(() => resolve({ network: { block: true, allow: [] } }))).toBe('network takes block or allow, not both');
  });
});

describe('schedules', () => {
  const fn = (schedule: Record<string, unknown>) => resolve({ kind: 'function', schedule });

  it('takes a cron expression (seconds allowed) in a timezone, or a period', () => {
    expect(fn({ cron: '*/5 * * * *', timezone: 'Europe/Paris' }).schedule).toEqual({
      cron: '*/5 * * * *',
      timezone: 'Europe/Paris',
      input: {},
      catchUp: 'none',
    });
    expect(fn({ cron: '*/1 * * * * *', catch_up: 'latest', input: { n: 1 } }).schedule).toMatchObject({
      timezone: 'UTC',
      catchUp: 'latest',
    });
    expect(fn({ every: '30s' }).schedule).toMatchObject({ everySeconds: 30 });
    expect(fn({ every: '2h' }).schedule).toMatchObject({ everySeconds: 7200 });
  });

  it('refuses what it cannot fire, saying what to fix', () => {
    expect(specError(() => fn({ cron: 'every day' }))).toMatch(/^schedule\.cron "every day" is not a cron expression/);
    expect(specError(() => fn({ cron: '* * * * *', timezone: 'Mars/Base' }))).toMatch(
      /^schedule\.timezone "Mars\/Base" is not an IANA timezone/,
    );
    expect(specError(() => fn({}))).toMatch(/^schedule needs exactly one of cron .* or every/);
    expect(specError(() => fn({ cron: '* * * * *', every: '1m' }))).toMatch(/exactly one/);
    expect(specError(() => resolve({ schedule: { every: '1m' } }))).toMatch(
      /^schedule applies to task_queue and function deployments only/,
    );
  });

  it('computes the same ticks on every replica', () => {
    const every = fn({ every: '10s' }).schedule!;
    const ticks = ticksBetween(every, new Date('2026-01-01T00:00:05Z'), new Date('2026-01-01T00:00:30Z'));
    expect(ticks.map((t) => t.toISOString())).toEqual(['2026-01-01T00:00:10.000Z', '2026-01-01T00:00:20.000Z', '2026-01-01T00:00:30.000Z']);
    const paris = fn({ cron: '0 9 * * *', timezone: 'Europe/Paris' }).schedule!;
    expect(nextTick(paris, new Date('2026-01-01T00:00:00Z'))?.toISOString()).toBe('2026-01-01T08:00:00.000Z');
    const seconds = fn({ cron: '*/1 * * * * *' }).schedule!;
    expect(ticksBetween(seconds, new Date('2026-01-01T00:00:00.500Z'), new Date('2026-01-01T00:00:03Z'))).toHaveLength(3);
  });
});
