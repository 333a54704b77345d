import { chown, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { ContainerExistsError, ContainerNotFoundError, ContainerRuntimeError, ContainerStartError } from '../errors.js';
import type { ImageStore } from '../images/image-store.js';
import { buildEnv, DEFAULT_NOFILE } from '../oci/config-builder.js';
import { freePort } from '../ports.js';
import {
  type ContainerRuntime,
  type ContainerSpec,
  type ExitResult,
  type LogLine,
  type LogOptions,
  type LogStream,
  type ManagedContainer,
  type RunningContainer,
  type RuntimeLogger,
  silentLogger,
  type UserSpec,
} from '../types.js';
import { validateSpec } from '../validation.js';
import { ANNOTATION } from '../runc/bundle.js';
import { exitFromInspect, managedFromInspect, type NerdctlInspect, nerdctlRunArgs, parseTimestamped } from './nerdctl-args.js';

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs `nerdctl <args>`; injectable so argument building can be tested without nerdctl. */
export type NerdctlExec = (args: string[], options?: { signal?: AbortSignal }) => Promise<ExecResult>;

/** Streams `nerdctl <args>` output line by line. */
export type NerdctlStream = (args: string[], signal?: AbortSignal) => AsyncIterable<{ stream: LogStream; line: string }>;

export interface NerdctlRuntimeOptions {
  images: ImageStore;
  binary?: string;
  /** containerd namespace for Tern's containers (default `tern`). */
  namespace?: string;
  volumeRoot: string;
  logger?: RuntimeLogger;
  defaultUser?: UserSpec;
  exec?: NerdctlExec;
  stream?: NerdctlStream;
}

const NO_SUCH = /no such container|not found|does not exist/i;

function defaultExec(binary: string): NerdctlExec {
  return async (args, options) => {
    const r = await execa(binary, args, { reject: false, stdin: 'ignore', ...(options?.signal ? { cancelSignal: options.signal } : {}) });
    if (r.isCanceled) throw Object.assign(new Error('aborted'), { name: 'AbortError' });
    if (r.exitCode === undefined) throw new ContainerRuntimeError(`${binary} ${args[0] ?? ''}: ${r.message}`);
    return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr };
  };
}

function defaultStream(binary: string): NerdctlStream {
  return (args, signal) => {
    const sub = execa(binary, args, { reject: false, stdin: 'ignore', buffer: false, ...(signal ? { cancelSignal: signal } : {}) });
    return merge<{ stream: LogStream; line: string }>([
      map(sub.iterable({ from: 'stdout' }), (line) => ({ stream: 'stdout' as const, line: String(line) })),
      map(sub.iterable({ from: 'stderr' }), (line) => ({ stream: 'stderr' as const, line: String(line) })),
    ]);
  };
}

async function* map<T, U>(source: AsyncIterable<T>, f: (t: T) => U): AsyncGenerator<U> {
  for await (const t of source) yield f(t);
}

/** Interleaves async iterables in arrival order. */
export async function* merge<T>(sources: AsyncIterable<T>[]): AsyncGenerator<T> {
  const iterators = sources.map((s) => s[Symbol.asyncIterator]());
  const pending = new Map(iterators.map((it, i) => [i, it.next().then((r) => ({ i, r }))]));
  while (pending.size) {
    const { i, r } = await Promise.race(pending.values());
    if (r.done) {
      pending.delete(i);
      continue;
    }
    pending.set(
      i,
      iterators[i]!.next().then((next) => ({ i, r: next })),
    );
    yield r.value;
  }
}

/**
 * Containers run through nerdctl (containerd). containerd's shim already keeps them alive
 * across agent restarts and records exit codes and OOM kills; Tern's labels mark its own.
 */
export class NerdctlRuntime implements ContainerRuntime {
  readonly kind = 'nerdctl' as const;
  private readonly exec: NerdctlExec;
  private readonly stream: NerdctlStream;
  private readonly ns: string;
  private readonly log: RuntimeLogger;

  constructor(private readonly options: NerdctlRuntimeOptions) {
    const binary = options.binary ?? 'nerdctl';
    this.exec = options.exec ?? defaultExec(binary);
    this.stream = options.stream ?? defaultStream(binary);
    this.ns = options.namespace ?? 'tern';
    this.log = options.logger ?? silentLogger;
  }

  private run(args: string[], signal?: AbortSignal) {
    return this.exec(['--namespace', this.ns, ...args], signal ? { signal } : undefined);
  }

  private async inspect(ids: string[]): Promise<NerdctlInspect[]> {
    if (!ids.length) return [];
    const r = await this.run(['inspect', '--mode', 'dockercompat', ...ids]);
    if (r.exitCode !== 0) {
      if (NO_SUCH.test(r.stderr)) return [];
      throw new ContainerRuntimeError(`nerdctl inspect: ${r.stderr.trim()}`);
    }
    return JSON.parse(r.stdout || '[]') as NerdctlInspect[];
  }

  private async inspectOne(id: string): Promise<NerdctlInspect> {
    const [found] = await this.inspect([id]);
    if (!found || found.Config?.Labels?.[ANNOTATION.managed] !== 'true') throw new ContainerNotFoundError(id);
    return found;
  }

  async start(spec: ContainerSpec): Promise<RunningContainer> {
    validateSpec(spec);
    if ((await this.inspect([spec.id])).length) throw new ContainerExistsError(spec.id);
    const image = await this.options.images.resolve(spec.image);
    const user = spec.user ?? image.user ?? this.options.defaultUser ?? { uid: 65534, gid: 65534 };
    const port = spec.port ?? ((spec.network ?? 'host') === 'host' ? await freePort() : undefined);
    const volumes = [];
    for (const v of spec.volumes ?? []) {
      const source = v.hostPath ?? join(this.options.volumeRoot, v.name);
      await mkdir(source, { recursive: true, mode: 0o755 });
      if (!v.readOnly) await chown(source, user.uid, user.gid);
      volumes.push({ source, destination: v.containerPath, readOnly: !!v.readOnly });
    }
    for (const b of spec.binds ?? []) volumes.push({ source: b.hostPath, destination: b.containerPath, readOnly: true });
    const args = spec.args?.length ? spec.args : [...image.entrypoint, ...image.cmd];
    if (!args.length) throw new ContainerStartError(spec.id, 'no args given and the image has no entrypoint or cmd', '');
    const created = new Date().toISOString();
    const r = await this.run(
      nerdctlRunArgs({
        spec,
        image,
        env: buildEnv({ imageEnv: image.env, userEnv: spec.env, port, containerId: spec.id }),
        args,
        user,
        ...(port !== undefined ? { port } : {}),
        volumes,
        created,
        nofile: DEFAULT_NOFILE,
        tmpBytes: spec.tmpBytes ?? 256 * 1024 * 1024,
        shmBytes: spec.shmBytes ?? 64 * 1024 * 1024,
      }),
    );
    if (r.exitCode !== 0) {
      await this.run(['rm', '-f', spec.id]).catch(() => undefined);
      throw new ContainerStartError(spec.id, 'nerdctl run failed', r.stderr.trim());
    }
    const info = await this.inspectOne(spec.id);
    this.log.info({ containerId: spec.id, port, image: image.ref }, 'container started');
    return {
      id: spec.id,
      runtime: 'nerdctl',
      image: { ref: image.ref, digest: image.digest },
      labels: spec.labels ?? {},
      ...(port !== undefined ? { port } : {}),
      ...(info.State.Pid ? { pid: info.State.Pid } : {}),
      startedAt: created,
    };
  }

  async wait(id: string, signal?: AbortSignal): Promise<ExitResult> {
    await this.inspectOne(id);
    const r = await this.run(['wait', id], signal);
    if (r.exitCode !== 0 && NO_SUCH.test(r.stderr)) throw new ContainerNotFoundError(id);
    return exitFromInspect(await this.inspectOne(id));
  }

  async stop(id: string, graceMs = 10_000): Promise<ExitResult> {
    const before = await this.inspectOne(id);
    if (before.State.Status === 'exited' || before.State.Status === 'stopped') return exitFromInspect(before);
    const r = await this.run(['stop', '-t', String(Math.max(0, Math.ceil(graceMs / 1000))), id]);
    if (r.exitCode !== 0 && !NO_SUCH.test(r.stderr)) throw new ContainerRuntimeError(`nerdctl stop ${id}: ${r.stderr.trim()}`, id);
    return exitFromInspect(await this.inspectOne(id));
  }

  async list(): Promise<ManagedContainer[]> {
    const r = await this.run(['ps', '-a', '-q', '--no-trunc', '--filter', `label=${ANNOTATION.managed}=true`]);
    if (r.exitCode !== 0) throw new ContainerRuntimeError(`nerdctl ps: ${r.stderr.trim()}`);
    const ids = r.stdout
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    return (await this.inspect(ids)).map(managedFromInspect).filter((c): c is ManagedContainer => !!c);
  }

  async adopt(id: string): Promise<ManagedContainer> {
    const c = managedFromInspect(await this.inspectOne(id));
    if (!c) throw new ContainerNotFoundError(id);
    this.log.info({ containerId: id, status: c.status }, 'container adopted');
    return c;
  }

  logs(id: string, options: LogOptions = {}): AsyncIterable<LogLine> {
    const args = ['--namespace', this.ns, 'logs', '-t', ...((options.follow ?? true) ? ['-f'] : []), id];
    const lines = this.stream(args, options.signal);
    return map(lines, ({ stream, line }) => ({ containerId: id, stream, ...parseTimestamped(line) }));
  }

  async remove(id: string): Promise<void> {
    const r = await this.run(['rm', '-f', id]);
    if (r.exitCode !== 0 && !NO_SUCH.test(r.stderr)) throw new ContainerRuntimeError(`nerdctl rm ${id}: ${r.stderr.trim()}`, id);
    this.log.info({ containerId: id }, 'container removed');
  }
}
