import { plainToInstance } from 'class-transformer';
import { IsInt, validate } from 'class-validator';
import {
  compiledValidatorOf,
  compileValidator,
  COMPILED_PAYLOADS,
  ContainerFailed,
  ContainerReady,
  ContainerScheduled,
  ContainerStarted,
  ContainerStarting,
  ContainerStopped,
  ContainerIsolation,
  GpuUsage,
  MachineHeartbeat,
  type Class,
} from './index.js';

/** What codec.ts did before the compiled check, for every payload: plainToInstance, then validate with whitelist. */
async function classValidatorAccepts(cls: Class<object>, plain: object): Promise<boolean> {
  const errors = await validate(plainToInstance(cls, plain), { whitelist: true, forbidNonWhitelisted: true });
  return errors.length === 0;
}

const at = '2026-11-28T07:00:00.000Z';
const event = { containerId: 'c-1', deploymentId: 'd-1', deploymentVersion: 3, workspaceId: 'w-1', machineId: 'm-1', at };
const resources = { cpuMillicores: 2000, memoryBytes: 8 * 1024 ** 3, gpuCount: 1, gpuType: 'H100' };

/** A valid payload of each compiled class, with every optional field present. */
const valid: [Class<object>, Record<string, unknown>][] = [
  [
    MachineHeartbeat,
    {
      machineId: 'm-1',
      pool: 'default',
      sentAt: at,
      sequence: 7,
      cpuPercent: 12.5,
      memoryPercent: 40,
      gpus: Array.from({ length: 8 }, (_, index) => ({
        index,
        model: 'NVIDIA H100 80GB HBM3',
        memoryMiB: 81559,
        state: index % 2 ? 'busy' : 'free',
      })),
      runningContainers: ['c-1', 'c-2'],
      agentVersion: '0.9.0',
      isolation: { runtime: 'runc', network: 'private', userNamespaces: true },
      builder: false,
      siteCache: 'https://cache.site-a.example:5000',
    },
  ],
  [ContainerScheduled, { ...event, resources, reason: 'scale-up' }],
  [ContainerStarting, { ...event }],
  [ContainerStarted, { ...event, resources, startupLatencyMs: 1200 }],
  [ContainerReady, { ...event, readyLatencyMs: 3400 }],
  [ContainerStopped, { ...event, exitCode: 0, oomKilled: false, reason: 'stop command: scale-down', signal: 'SIGTERM' }],
  [ContainerFailed, { ...event, phase: 'runtime', error: 'exited 1', exitCode: 1, lastLines: ['! Traceback', 'ValueError'] }],
];

/** Values each field is replaced by in turn: every JSON type, out-of-range numbers, extra nesting. */
const replacements: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  101,
  2 ** 53,
  '',
  'x',
  '12',
  'a'.repeat(301),
  [],
  ['x'],
  [1],
  [null],
  [{}],
  [[]],
  {},
  { a: 1 },
  { index: 0 },
];

type Path = (string | number)[];

/** Every path to a field in `value`, arrays' first element included. */
function paths(value: unknown, prefix: Path = []): Path[] {
  if (Array.isArray(value)) return value.length ? [[...prefix, 0], ...paths(value[0], [...prefix, 0])] : [];
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => [[...prefix, k], ...paths(v, [...prefix, k])]);
}

/** A JSON copy of `payload` with the field at `path` replaced (or removed, for undefined). */
function withField(payload: object, path: Path, replacement: unknown): object {
  const copy = JSON.parse(JSON.stringify(payload)) as Record<string | number, unknown>;
  let parent = copy;
  for (const step of path.slice(0, -1)) parent = parent[step] as Record<string | number, unknown>;
  const last = path.at(-1)!;
  if (replacement === undefined && !Array.isArray(parent)) delete parent[last];
  else parent[last] = replacement;
  return copy;
}

/** The corpus for one class: the valid payload, and each field broken once in every way above. */
function corpus(payload: Record<string, unknown>): { name: string; plain: object }[] {
  const cases = [{ name: 'valid', plain: JSON.parse(JSON.stringify(payload)) as object }];
  for (const path of paths(payload)) {
    cases.push({ name: `${path.join('.')} missing`, plain: withField(payload, path, undefined) });
    for (const r of replacements)
      cases.push({ name: `${path.join('.')} = ${JSON.stringify(r).slice(0, 20)}`, plain: withField(payload, path, r) });
    const original = path.reduce<unknown>((v, step) => (v as Record<string | number, unknown>)[step], payload);
    cases.push({ name: `${path.join('.')} nested in an array`, plain: withField(payload, path, [original]) });
    cases.push({ name: `${path.join('.')} nested in an object`, plain: withField(payload, path, { value: original }) });
    if (typeof original === 'object' && original !== null && !Array.isArray(original))
      cases.push({ name: `${path.join('.')} with an extra key`, plain: withField(payload, path, { ...original, extra: 1 }) });
  }
  const raw = JSON.stringify(payload).slice(1);
  for (const key of ['extra', '__proto__', 'constructor', 'toString', 'hasOwnProperty'])
    cases.push({ name: `extra key ${key}`, plain: JSON.parse(`{"${key}":{"a":1},${raw}`) as object });
  return cases;
}

describe('compiled validation', () => {
  it('compiles every payload it is used for (none silently falls back to class-validator)', () => {
    for (const cls of COMPILED_PAYLOADS) expect(compiledValidatorOf(cls as Class<object>)).toBeDefined();
  });

  it.each(valid.map(([cls, payload]) => [cls.name, cls, payload] as const))(
    '%s: agrees with class-validator on every payload of the corpus',
    async (_name, cls, payload) => {
      const compiled = compileValidator(cls)!;
      const cases = corpus(payload);
      const disagreements: string[] = [];
      let refused = 0;
      for (const { name, plain } of cases) {
        const expected = await classValidatorAccepts(cls, plain);
        const actual = compiled(plain) !== undefined;
        if (!expected) refused++;
        // Only ever yes where class-validator says yes; a no goes to class-validator, which decides.
        if (actual !== expected && !(expected && ['__proto__', 'constructor', 'toString', 'hasOwnProperty'].some((k) => name.endsWith(k))))
          disagreements.push(`${name}: compiled ${actual}, class-validator ${expected}`);
        if (actual && !expected) disagreements.push(`${name}: accepted what class-validator refuses`);
      }
      expect(disagreements).toEqual([]);
      // The corpus does break rules: most of it is refused.
      expect(refused).toBeGreaterThan(cases.length / 2);
    },
  );

  it('agrees on huge arrays, and on one bad element among them', async () => {
    const [, heartbeat] = valid[0];
    const gpu = (heartbeat.gpus as object[])[0];
    const compiled = compileValidator(MachineHeartbeat)!;
    const huge = [
      { ...heartbeat, gpus: Array.from({ length: 5000 }, () => gpu) },
      { ...heartbeat, runningContainers: Array.from({ length: 50_000 }, (_, i) => `c-${i}`) },
      { ...heartbeat, runningContainers: [...Array.from({ length: 50_000 }, (_, i) => `c-${i}`), 7] },
      { ...heartbeat, gpus: [...Array.from({ length: 5000 }, () => gpu), { ...gpu, memoryMiB: -1 }] },
    ];
    const answers = await Promise.all(huge.map(async (p) => [await classValidatorAccepts(MachineHeartbeat, p), compiled(p) !== undefined]));
    expect(answers).toEqual([
      [true, true],
      [true, true],
      [false, false],
      [false, false],
    ]);
  });

  it('gives what plainToInstance gives: the same fields, nested classes as instances', () => {
    const [, heartbeat] = valid[0];
    const plain = JSON.parse(JSON.stringify(heartbeat)) as object;
    const value = compileValidator(MachineHeartbeat)!(plain)!;
    const transformed = plainToInstance(MachineHeartbeat, plain);
    expect(value).toBeInstanceOf(MachineHeartbeat);
    expect(value.gpus[0]).toBeInstanceOf(GpuUsage);
    expect(value.isolation).toBeInstanceOf(ContainerIsolation);
    expect(value).toEqual(transformed);
    const started = compileValidator(ContainerStarted)!(valid[3][1])!;
    expect(started).toEqual(plainToInstance(ContainerStarted, valid[3][1]));
  });

  it('leaves classes it cannot mirror to class-validator', () => {
    class WithDefault {
      @IsInt() count = 1;
    }
    expect(compileValidator(WithDefault)).toBeUndefined();
    // Not among the compiled payloads: the plain path.
    expect(compiledValidatorOf(WithDefault)).toBeUndefined();
  });
});
