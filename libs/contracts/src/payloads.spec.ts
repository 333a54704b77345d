import { plainToInstance } from 'class-transformer';
import { validate, type ValidationError } from 'class-validator';
import {
  AGENT_CONTAINER_START,
  CONTAINER_STOPPED,
  MACHINE_DISCOVERED,
  MACHINE_HEARTBEAT,
  MACHINE_FAULT,
  MACHINE_STATE_CHANGED,
  REPUTATION_SCORE,
  TASK_ATTEMPTS_ENDED,
  TASK_COMPLETED,
  TASK_COMPLETED_MANY,
  TASK_ITEM,
  type Contract,
} from './index.js';

/** What the messaging library does with an inbound payload: the problems as "path: message". */
async function problems(contract: Contract, plain: unknown): Promise<string[]> {
  const instance = plainToInstance(contract.payload, plain as object);
  const errors = await validate(instance, { whitelist: true, forbidNonWhitelisted: true });
  return flatten(errors);
}

function flatten(errors: ValidationError[], prefix = ''): string[] {
  return errors.flatMap((e) => [
    ...Object.values(e.constraints ?? {}).map((m) => `${prefix}${e.property}: ${m}`),
    ...flatten(e.children ?? [], `${prefix}${e.property}.`),
  ]);
}

const at = '2025-01-01T12:00:00.000Z';

const heartbeat = {
  machineId: 'm-1',
  pool: 'default',
  sentAt: at,
  sequence: 7,
  cpuPercent: 12.5,
  memoryPercent: 40,
  gpus: [{ index: 0, model: 'NVIDIA H100', memoryMiB: 81559, state: 'free' }],
  runningContainers: [],
};

const containerStart = {
  containerId: 'c-1',
  deploymentId: 'd-1',
  deploymentVersion: 3,
  workspaceId: 'w-1',
  deploymentKind: 'endpoint',
  image: 'ghcr.io/acme/llm:1',
  handler: 'app.py:predict',
  env: { MODEL: 'llama' },
  resources: { cpuMillicores: 2000, memoryBytes: 8 * 1024 ** 3, gpuCount: 1, gpuType: 'H100' },
  volumes: [{ volume: 'weights', mountPath: '/weights', readOnly: true }],
  ports: [8000],
  workers: 1,
  concurrency: 4,
  startupTimeoutSeconds: 600,
  requestedAt: at,
};

const discovered = {
  machineId: 'm-1',
  hostname: 'box',
  cpu: { model: 'AMD EPYC', cores: 16, threads: 32 },
  memoryBytes: 128 * 1024 ** 3,
  disks: [{ mount: '/', fsType: 'ext4', sizeBytes: 1e12, freeBytes: 5e11 }],
  os: { platform: 'linux', distro: 'Ubuntu', release: '24.04', kernel: '6.8.0', arch: 'x64' },
  networkInterfaces: [{ name: 'eth0', addresses: ['10.0.0.2', 'fe80::1'], speedMbps: null }],
  gpus: [{ index: 0, vendor: 'nvidia', model: 'H100', memoryMiB: 81559, driverVersion: '550.54', cudaVersion: '12.4' }],
  discoveredAt: at,
};

const stopped = {
  containerId: 'c-1',
  deploymentId: 'd-1',
  deploymentVersion: 3,
  workspaceId: 'w-1',
  machineId: 'm-1',
  at,
  exitCode: null,
  oomKilled: false,
  reason: 'stop command: scale-down',
  signal: 'SIGTERM',
};

const taskItem = {
  taskId: 't-1',
  deploymentId: 'd-1',
  deploymentVersion: 1,
  workspaceId: 'w-1',
  payload: { prompt: 'hi', options: { n: 2 } },
  maxRetries: 2,
  timeoutSeconds: 60,
  enqueuedAt: at,
};

describe('payload validation', () => {
  it.each([
    ['heartbeat', MACHINE_HEARTBEAT, heartbeat],
    ['container start', AGENT_CONTAINER_START, containerStart],
    ['machine discovered', MACHINE_DISCOVERED, discovered],
    ['container stopped', CONTAINER_STOPPED, stopped],
    ['container stopped with an exit code', CONTAINER_STOPPED, { ...stopped, exitCode: 137, oomKilled: true, signal: undefined }],
    ['task item', TASK_ITEM, taskItem],
    [
      'task completed with any JSON result',
      TASK_COMPLETED,
      {
        taskId: 't-1',
        deploymentId: 'd-1',
        workspaceId: 'w-1',
        containerId: 'c-1',
        machineId: 'm-1',
        attempt: 1,
        durationMs: 5,
        result: [1, 'two'],
        completedAt: at,
      },
    ],
    [
      'machine state changed from nothing',
      MACHINE_STATE_CHANGED,
      { machineId: 'm-1', pool: 'p', from: null, to: 'pending', reason: 'created', changedAt: at },
    ],
    [
      'reputation score',
      REPUTATION_SCORE,
      { machineId: 'm-1', score: 0.93, components: { uptime: 0.99, taskSuccess: 0.9 }, observed: 0, standing: 'unproven', computedAt: at },
    ],
    [
      'machine fault',
      MACHINE_FAULT,
      {
        machineId: 'm-1',
        kind: 'start-unanswered',
        containerId: 'c-1',
        deploymentId: 'd-1',
        deploymentVersion: 1,
        workspaceId: 'w-1',
        afterReady: false,
        reason: 'start on machine m-1 failed: timed out',
        at,
      },
    ],
  ])('accepts a valid %s', async (_label, contract, sample) => {
    expect(await problems(contract as Contract, sample)).toEqual([]);
  });

  it('names wrong top-level fields', async () => {
    const found = await problems(MACHINE_HEARTBEAT, { ...heartbeat, machineId: 'has space', sequence: -1, sentAt: 'yesterday' });
    expect(found).toEqual(
      expect.arrayContaining([
        'machineId: machineId must be 1-64 letters, digits, - or _',
        expect.stringMatching(/^sequence: /),
        expect.stringMatching(/^sentAt: /),
      ]),
    );
    expect(found).toHaveLength(3);
  });

  it('names missing fields and refuses unknown ones', async () => {
    const { pool: _pool, ...withoutPool } = heartbeat;
    const found = await problems(MACHINE_HEARTBEAT, { ...withoutPool, extra: 1 });
    expect(found).toEqual(expect.arrayContaining(['pool: pool must be a string', 'extra: property extra should not exist']));
  });

  it('names the path of a bad field inside nested objects and arrays', async () => {
    const found = await problems(AGENT_CONTAINER_START, {
      ...containerStart,
      resources: { ...containerStart.resources, gpuCount: 'one' },
      volumes: [{ volume: 'weights', mountPath: 'weights', readOnly: true, size: 1 }],
    });
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^resources\.gpuCount: /),
        'volumes.0.mountPath: mountPath must be an absolute path',
        'volumes.0.size: property size should not exist',
      ]),
    );
  });

  it('refuses a start order naming an oci: path on the machine', async () => {
    expect(await problems(AGENT_CONTAINER_START, { ...containerStart, image: 'oci:/etc:latest' })).toEqual([
      'image: image must not be an oci:<path> on the machine; deployments run "host" or a registry image',
    ]);
    expect(await problems(AGENT_CONTAINER_START, { ...containerStart, image: 'host' })).toEqual([]);
    expect(await problems(AGENT_CONTAINER_START, { ...containerStart, image: `r.example.com/a/b@sha256:${'e'.repeat(64)}` })).toEqual([]);
  });

  it('checks the values of string and number records', async () => {
    expect(await problems(AGENT_CONTAINER_START, { ...containerStart, env: { PORT: 8000 } })).toEqual([
      'env: env must be an object whose values are all strings',
    ]);
    expect(await problems(REPUTATION_SCORE, { machineId: 'm-1', score: 1.5, components: { uptime: 'good' }, computedAt: at })).toEqual(
      expect.arrayContaining([expect.stringMatching(/^score: /), 'components: components must be an object whose values are all numbers']),
    );
  });

  it('lets a nullable field be null but not missing', async () => {
    const { exitCode: _exitCode, ...withoutExitCode } = stopped;
    expect(await problems(CONTAINER_STOPPED, withoutExitCode)).toEqual([expect.stringMatching(/^exitCode: /)]);
    expect(await problems(CONTAINER_STOPPED, { ...stopped, exitCode: 'x' })).toEqual([expect.stringMatching(/^exitCode: /)]);
  });

  it('takes any JSON value but null as a task payload, and checks enums', async () => {
    for (const payload of [[1, 2], 7, 'text', false, {}]) expect(await problems(TASK_ITEM, { ...taskItem, payload })).toEqual([]);
    expect(await problems(TASK_ITEM, { ...taskItem, payload: null })).toEqual([expect.stringMatching(/^payload: /)]);
    expect(
      await problems(MACHINE_STATE_CHANGED, { machineId: 'm-1', pool: 'p', from: 'ready', to: 'asleep', reason: 'r', changedAt: at }),
    ).toEqual([expect.stringMatching(/^to: to must be one of the following values: pending, registered/)]);
  });

  it('checks every member of a bunch of completions or of attempt facts, naming its place', async () => {
    const completion = {
      taskId: 't-1',
      deploymentId: 'd-1',
      workspaceId: 'w-1',
      containerId: 'c-1',
      machineId: 'm-1',
      attempt: 1,
      durationMs: 5,
      result: 1,
      completedAt: at,
      withStart: true,
    };
    expect(await problems(TASK_COMPLETED_MANY, { machineId: 'm-1', completions: [completion, { ...completion, taskId: 't-2' }] })).toEqual(
      [],
    );
    expect(await problems(TASK_COMPLETED_MANY, { machineId: 'm-1', completions: [completion, { ...completion, attempt: 0 }] })).toEqual([
      expect.stringMatching(/^completions\.1\.attempt: /),
    ]);
    expect(await problems(TASK_COMPLETED_MANY, { machineId: 'm-1', completions: [] })).toEqual([expect.stringMatching(/^completions: /)]);
    const fact = {
      taskId: 't-1',
      attempt: 1,
      workspaceId: 'w-1',
      deploymentId: 'd-1',
      machineId: 'm-1',
      outcome: 'completed',
      endedAt: at,
    };
    expect(await problems(TASK_ATTEMPTS_ENDED, { attempts: [fact, { ...fact, attempt: 2, durationMs: 3 }] })).toEqual([]);
    expect(await problems(TASK_ATTEMPTS_ENDED, { attempts: [{ ...fact, outcome: 'maybe' }] })).toEqual([
      expect.stringMatching(/^attempts\.0\.outcome: /),
    ]);
  });
});
