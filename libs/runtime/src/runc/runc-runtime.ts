import { chown, lchown, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import {
  ContainerExistsError,
  ContainerNotFoundError,
  ContainerRuntimeError,
  ContainerStartError,
  InvalidContainerSpecError,
} from '../errors.js';
import { GpuInjector } from '../gpu/gpu-edits.js';
import type { ImageStore } from '../images/image-store.js';
import type { PreparedImage } from '../images/prepared-image.js';
import { tailLogs } from '../logs/log-tail.js';
import {
  buildEnv,
  buildOciConfig,
  DEFAULT_NOFILE,
  DEFAULT_PATH,
  type UserNamespaceMapping,
  type VolumeBind,
} from '../oci/config-builder.js';
import { ensureMountPoints } from '../oci/mount-points.js';
import type { OciMount } from '../oci/oci-spec.js';
import { freePort } from '../ports.js';
import {
  type ContainerRuntime,
  type ContainerSpec,
  type ContainerStatus,
  type ExitResult,
  type LogLine,
  type LogOptions,
  type ManagedContainer,
  type RunningContainer,
  type RuntimeLogger,
  silentLogger,
  type UserSpec,
} from '../types.js';
import { validateSpec } from '../validation.js';
import { annotationsFor, Bundle, parseAnnotations, SHIM_SCRIPT } from './bundle.js';
import { Cgroups, nofileHardLimit } from './cgroups.js';
import { ContainerExits } from './container-exits.js';
import { RuncCli, type RuncState } from './runc-cli.js';
import { type ExecSpec, runcExecArgs, SUPERVISED_EXEC_SCRIPT, supervisedExecArgs } from './runc-exec.js';
import { awaitStart } from './start-wait.js';
import { userNamespaceRefusal } from './user-namespace.js';
import type { BridgeNetwork } from '../net/bridge-network.js';
import { exists } from '../fs-exists.js';

export interface RuncRuntimeOptions {
  /** `<stateDir>/runc` is runc's --root, `<stateDir>/containers/<id>` each bundle. */
  stateDir: string;
  images: ImageStore;
  /** Volumes are `<volumeRoot>/<name>` (default `<stateDir>/volumes`). */
  volumeRoot?: string;
  runc?: string;
  /** Parent of every container's cgroup (default `/tern`). */
  cgroupParent?: string;
  logger?: RuntimeLogger;
  gpu?: GpuInjector;
  /** How long start() waits for runc to have the process running (default 30 s). */
  startTimeoutMs?: number;
  /** Who the process runs as when neither the spec nor the image says (default nobody, 65534). */
  defaultUser?: UserSpec;
  /**
   * Run each container in its own user namespace: container uid/gid n is host hostId + n, so
   * container root is an unprivileged host user. Checked once (userNamespaceRefusal): where the
   * host refuses, containers run without one and the reason is logged. Absent: ids are the host's.
   */
  userNamespace?: UserNamespaceMapping;
  /** The bridge that `private` containers join; without it, a start asking for one is refused. */
  network?: BridgeNetwork;
}

/** `$PORT` of a container on a private network when the spec names none: it has the namespace to itself. */
export const PRIVATE_PORT = 8080;

const NOBODY: UserSpec = { uid: 65534, gid: 65534 };
const DEFAULT_TMP_BYTES = 256 * 1024 * 1024;
const DEFAULT_SHM_BYTES = 64 * 1024 * 1024;

function mapStatus(s: RuncState['status']): ContainerStatus {
  if (s === 'creating' || s === 'created') return 'creating';
  if (s === 'pausing' || s === 'paused') return 'paused';
  return s;
}

/**
 * Containers run by runc, each under a detached shim (see SHIM_SCRIPT) so they outlive the
 * agent. All state is on disk (runc's root and the bundle directories): a new instance after a
 * crash sees everything the old one started, through list().
 */
export class RuncRuntime implements ContainerRuntime {
  readonly kind = 'runc' as const;
  private readonly runc: RuncCli;
  private readonly cgroups = new Cgroups();
  private readonly containersDir: string;
  private readonly volumeRoot: string;
  private readonly log: RuntimeLogger;
  private readonly gpu: GpuInjector;
  private readonly portsInUse = new Set<number>();
  private readonly exits: ContainerExits;
  private host?: Promise<{ limitSwap: boolean; nofile: number; userNamespace?: UserNamespaceMapping }>;

  constructor(private readonly options: RuncRuntimeOptions) {
    this.runc = new RuncCli(options.runc ?? 'runc', join(options.stateDir, 'runc'));
    this.containersDir = join(options.stateDir, 'containers');
    this.volumeRoot = options.volumeRoot ?? join(options.stateDir, 'volumes');
    this.log = options.logger ?? silentLogger;
    this.gpu = options.gpu ?? new GpuInjector();
    this.exits = new ContainerExits({ bundle: (id) => this.bundle(id), runc: this.runc, cgroups: this.cgroups, log: this.log });
  }

  /** runc's --root: `runc --root <this> list` shows what Tern runs here. */
  get runcRoot(): string {
    return this.runc.root;
  }

  /**
   * Starts a process inside a running container; stdin, stdout and stderr are pipes. It ends
   * with the process (exit code, or 128+n for signal n); killing it kills only the runc
   * client, so signal the pid in `spec.pidFile` to stop the process itself.
   */
  exec(id: string, spec: ExecSpec) {
    return execa(this.runc.binary, runcExecArgs(this.runc.root, id, spec), {
      reject: false,
      stdin: 'pipe',
      stdout: 'pipe',
      stderr: 'pipe',
      buffer: false,
      encoding: 'buffer',
    });
  }

  /**
   * Starts a process inside a running container under a supervisor (SUPERVISED_EXEC_SCRIPT) in
   * its own session, so it outlives the caller: its output and exit status go to files in `dir`
   * (EXEC_FILES). Stdin is a pipe from the caller (closed when the caller dies); the returned
   * child ends with the supervisor, after the exit file is written.
   */
  execSupervised(id: string, spec: ExecSpec, dir: string) {
    const child = execa(
      '/bin/sh',
      ['-c', SUPERVISED_EXEC_SCRIPT, ...supervisedExecArgs(dir, this.runc.binary, runcExecArgs(this.runc.root, id, spec))],
      {
        detached: true, // own session: outlives the agent
        cleanup: false, // execa must not kill it when the agent exits
        stdin: 'pipe',
        stdout: 'ignore',
        stderr: 'ignore',
        reject: false,
      },
    );
    void child.catch(() => undefined);
    return child;
  }

  bundle(id: string): Bundle {
    return new Bundle(join(this.containersDir, id));
  }

  private hostFacts() {
    return (this.host ??= (async () => ({
      limitSwap: await this.cgroups.swapAccounting(),
      nofile: Math.min(DEFAULT_NOFILE, (await nofileHardLimit()) ?? DEFAULT_NOFILE),
      userNamespace: await this.usableUserNamespace(),
    }))());
  }

  private async usableUserNamespace(): Promise<UserNamespaceMapping | undefined> {
    const mapping = this.options.userNamespace;
    if (!mapping) return undefined;
    const refusal = await userNamespaceRefusal(mapping, this.options.images.root);
    if (refusal) {
      this.log.warn({ reason: refusal }, `containers run without a user namespace: ${refusal}`);
      return undefined;
    }
    this.log.info({ hostId: mapping.hostId, size: mapping.size }, 'containers run in user namespaces');
    return mapping;
  }

  /**
   * The bridge, set up once: leases of containers with no bundle left (the agent died between
   * the two, or the bundle was removed while it was away) are released.
   */
  private async networkReady(): Promise<BridgeNetwork> {
    const network = this.options.network;
    if (!network) throw new InvalidContainerSpecError('this runtime has no private network (no bridge configured); use network "host"');
    const bundles = (await readdir(this.containersDir).catch(() => [] as string[])).filter((d) => !d.startsWith('.'));
    await network.setup(new Set(bundles));
    return network;
  }

  /** The mapping containers get, once the host has been checked; undefined: none. */
  async userNamespace(): Promise<UserNamespaceMapping | undefined> {
    return (await this.hostFacts()).userNamespace;
  }

  /** The image, pulled and unpacked as start() prepares it (cached): what a container of it will see. */
  image(ref: string): Promise<PreparedImage> {
    return this.options.images.resolve(ref);
  }

  async start(spec: ContainerSpec): Promise<RunningContainer> {
    validateSpec(spec);
    const bundle = this.bundle(spec.id);
    // runc keeps each container's state in <root>/<id>: checked directly, an exec of `runc state` costs ~20 ms.
    if ((await exists(bundle.dir)) || (await exists(join(this.runc.root, spec.id)))) throw new ContainerExistsError(spec.id);
    const image = await this.options.images.resolve(spec.image);
    await mkdir(this.containersDir, { recursive: true, mode: 0o700 });
    try {
      await mkdir(bundle.dir, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new ContainerExistsError(spec.id);
      throw e;
    }
    const network = spec.network ?? 'host';
    let port = spec.port;
    let address: string | undefined;
    try {
      if (port === undefined && network === 'host') port = await freePort(this.portsInUse);
      if (network === 'host' && port !== undefined) this.portsInUse.add(port);
      let netnsPath: string | undefined;
      let imageMounts = image.mounts;
      if (network === 'private') {
        const bridge = await this.networkReady();
        const attached = await bridge.attach(spec.id, spec.egress ?? {});
        address = attached.address;
        netnsPath = bridge.netnsPath(attached);
        port ??= PRIVATE_PORT;
        // Names resolve through the bridge's DNS forwarder: the host's resolvers are out of reach.
        if (bridge.resolvConf) imageMounts = withResolvConf(image.mounts, bridge.resolvConf);
      }
      const user = spec.user ?? image.user ?? this.options.defaultUser ?? NOBODY;
      const args = spec.args?.length ? spec.args : [...image.entrypoint, ...image.cmd];
      if (!args.length) throw new ContainerStartError(spec.id, 'no args given and the image has no entrypoint or cmd', '');
      const created = new Date().toISOString();
      const labels = spec.labels ?? {};
      const facts = await this.hostFacts();
      const config = buildOciConfig({
        id: spec.id,
        rootfs: image.rootfs,
        args,
        env: buildEnv({ imageEnv: image.env, userEnv: spec.env, port, containerId: spec.id }),
        cwd: spec.cwd ?? image.cwd ?? '/',
        user,
        memoryBytes: spec.memoryBytes,
        cpuMillicores: spec.cpuMillicores,
        pidsLimit: spec.pidsLimit,
        tmpBytes: spec.tmpBytes ?? DEFAULT_TMP_BYTES,
        shmBytes: spec.shmBytes ?? DEFAULT_SHM_BYTES,
        network,
        netnsPath,
        imageMounts,
        volumes: await this.prepareVolumes(spec, user, facts.userNamespace),
        edits: spec.gpus?.devices.length ? await this.gpu.edits(spec.gpus, !image.sharesHostUsr) : undefined,
        cgroupsPath: `${this.options.cgroupParent ?? '/tern'}/${spec.id}`,
        annotations: annotationsFor({ image: { ref: image.ref, digest: image.digest }, labels, port, address, created }),
        limitSwap: facts.limitSwap,
        nofile: facts.nofile,
        userNamespace: facts.userNamespace,
      });
      if (facts.userNamespace) await ensureMountPoints(image.rootfs, config.mounts);
      await writeFile(bundle.config, JSON.stringify(config, null, 2), { mode: 0o600 });
      await writeFile(bundle.stdout, '', { mode: 0o600 });
      await writeFile(bundle.stderr, '', { mode: 0o600 });
      await this.spawnShim(bundle, spec.id);
      const pid = await this.waitUntilRunning(spec.id, bundle);
      this.log.info({ containerId: spec.id, pid, port, address, image: image.ref }, 'container started');
      return {
        id: spec.id,
        runtime: 'runc',
        image: { ref: image.ref, digest: image.digest },
        labels,
        ...(port !== undefined ? { port } : {}),
        ...(address ? { address } : {}),
        pid,
        startedAt: created,
      };
    } catch (e) {
      if (port !== undefined && network === 'host') this.portsInUse.delete(port);
      await this.remove(spec.id).catch((err: unknown) => this.log.warn({ containerId: spec.id, err }, 'cleanup after failed start failed'));
      throw e instanceof ContainerRuntimeError ? e : new ContainerStartError(spec.id, (e as Error).message, '');
    }
  }

  private async prepareVolumes(spec: ContainerSpec, user: UserSpec, userns?: UserNamespaceMapping): Promise<VolumeBind[]> {
    const binds: VolumeBind[] = [];
    for (const v of spec.volumes ?? []) {
      const source = v.hostPath ?? join(this.volumeRoot, v.name);
      await mkdir(source, { recursive: true, mode: 0o755 });
      // The container's user must be able to write its writable volumes; the last writer's
      // user owns a volume shared by containers running as different users.
      const shift = userns?.hostId ?? 0;
      if (!v.readOnly) await chown(source, shift + user.uid, shift + user.gid);
      // A materialized volume is the container's own copy: every file of it is its user's.
      if (!v.readOnly && v.hostPath) await chownTree(source, shift + user.uid, shift + user.gid);
      binds.push({ source, destination: v.containerPath, readOnly: !!v.readOnly });
    }
    for (const b of spec.binds ?? []) binds.push({ source: b.hostPath, destination: b.containerPath, readOnly: true });
    return binds;
  }

  private async spawnShim(bundle: Bundle, id: string): Promise<void> {
    const shim = execa('/bin/sh', ['-c', SHIM_SCRIPT, 'tern-shim', this.runc.binary, this.runc.root, bundle.dir, id], {
      cwd: bundle.dir,
      detached: true, // own session: outlives the agent
      cleanup: false, // execa must not kill it when the agent exits
      stdio: 'ignore',
      reject: false,
      extendEnv: false,
      env: { PATH: process.env.PATH ?? DEFAULT_PATH },
    });
    shim.unref();
    void shim.catch(() => undefined);
    if (!shim.pid) throw new ContainerStartError(id, 'could not spawn the runc shim', '');
    await writeFile(bundle.shimPidFile, String(shim.pid));
  }

  private async waitUntilRunning(id: string, bundle: Bundle): Promise<number> {
    const outcome = await awaitStart(
      {
        pid: async () => Number((await readFile(bundle.pidFile, 'utf8').catch(() => '')).trim()) || undefined,
        exitStatus: async () => (await readFile(bundle.exitFile, 'utf8').catch(() => undefined))?.trim(),
      },
      this.options.startTimeoutMs ?? 30_000,
    );
    if (outcome.started) return outcome.pid;
    throw new ContainerStartError(id, outcome.reason, await this.outputTail(bundle));
  }

  private async outputTail(bundle: Bundle): Promise<string> {
    const tail = async (p: string) => (await readFile(p, 'utf8').catch(() => '')).split('\n').slice(-20).join('\n').trim();
    return [await tail(bundle.stderr), await tail(bundle.runcLog)].filter(Boolean).join('\n');
  }

  wait(id: string, signal?: AbortSignal): Promise<ExitResult> {
    return this.exits.wait(id, signal);
  }

  async stop(id: string, graceMs = 10_000): Promise<ExitResult> {
    if (!(await exists(this.bundle(id).dir))) throw new ContainerNotFoundError(id);
    const done = await this.exits.result(id);
    if (done) return done;
    // PID 1 of a pid namespace ignores SIGTERM unless it handles it: then the grace period runs out.
    const signalled = await this.runc.kill(id, 'SIGTERM');
    const result = signalled ? await this.exits.waitAtMost(id, graceMs) : undefined;
    if (result) return result;
    await this.runc.kill(id, 'SIGKILL', true);
    const killed = await this.exits.waitAtMost(id, 15_000);
    if (!killed) throw new ContainerRuntimeError(`container ${id} did not exit after SIGKILL`, id);
    this.log.info({ containerId: id, graceMs }, 'container killed after grace period');
    return killed;
  }

  async list(): Promise<ManagedContainer[]> {
    const states = new Map((await this.runc.list()).map((s) => [s.id, s]));
    const dirs = (await readdir(this.containersDir).catch(() => [] as string[])).filter((d) => !d.startsWith('.'));
    const out: ManagedContainer[] = [];
    for (const id of new Set([...states.keys(), ...dirs])) {
      const state = states.get(id);
      const meta = parseAnnotations(state?.annotations ?? (await this.bundle(id).readConfig())?.annotations);
      if (!meta) continue;
      let exit = await this.exits.result(id);
      let status: ContainerStatus;
      if (exit) status = 'stopped';
      else if (state) status = mapStatus(state.status);
      else status = (await this.exits.shimAlive(id)) ? 'creating' : 'unknown';
      if (!exit && (status === 'stopped' || status === 'unknown')) {
        exit = await this.exits.lost(id);
        if (exit) status = 'stopped';
      }
      out.push({
        id,
        runtime: 'runc',
        image: meta.image,
        labels: meta.labels,
        ...(meta.port !== undefined ? { port: meta.port } : {}),
        ...(meta.address ? { address: meta.address } : {}),
        ...(state?.pid ? { pid: state.pid } : {}),
        startedAt: meta.created,
        status,
        ...(exit ? { exit } : {}),
      });
    }
    return out;
  }

  async adopt(id: string): Promise<ManagedContainer> {
    const found = (await this.list()).find((c) => c.id === id);
    if (!found) throw new ContainerNotFoundError(id);
    if (found.port !== undefined && !found.address) this.portsInUse.add(found.port);
    if (found.address) await this.networkReady();
    this.log.info({ containerId: id, status: found.status }, 'container adopted');
    return found;
  }

  logs(id: string, options: LogOptions = {}): AsyncIterable<LogLine> {
    const bundle = this.bundle(id);
    let checks = 0;
    const isFinished = async () =>
      (await exists(bundle.exitFile)) ||
      (await exists(bundle.resultFile)) ||
      (++checks % 40 === 0 && !!(await this.exits.lost(id))) ||
      !(await exists(bundle.dir));
    return (async function* () {
      if (!(await exists(bundle.dir))) throw new ContainerNotFoundError(id);
      yield* tailLogs(
        id,
        [
          { stream: 'stdout', path: bundle.stdout },
          { stream: 'stderr', path: bundle.stderr },
        ],
        { follow: options.follow ?? true, ...(options.signal ? { signal: options.signal } : {}), isFinished },
      );
    })();
  }

  async remove(id: string): Promise<void> {
    const bundle = this.bundle(id);
    const state = await this.runc.state(id).catch(() => undefined);
    const meta = parseAnnotations(state?.annotations ?? (await bundle.readConfig())?.annotations);
    const port = meta?.address ? undefined : meta?.port;
    if (state && state.status !== 'stopped') {
      await this.runc.kill(id, 'SIGKILL', true).catch(() => false);
      await this.exits.waitAtMost(id, 10_000).catch(() => undefined);
    }
    // Read the OOM counters while the cgroup still exists.
    if (await exists(bundle.dir)) await this.exits.result(id).catch(() => undefined);
    await this.runc.delete(id);
    await this.options.network?.detach(id);
    await rm(bundle.dir, { recursive: true, force: true });
    if (port !== undefined) this.portsInUse.delete(port);
    this.log.info({ containerId: id }, 'container removed');
  }
}

/** Hands a directory tree to uid:gid (links themselves, never what they point at). */
async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    await lchown(join(entry.parentPath, entry.name), uid, gid);
  }
}

/** `mounts` with /etc/resolv.conf bound from `file` (read-only), in place of the image's own. */
function withResolvConf(mounts: readonly OciMount[], file: string): OciMount[] {
  return [
    ...mounts.filter((m) => m.destination !== '/etc/resolv.conf'),
    { destination: '/etc/resolv.conf', type: 'bind', source: file, options: ['bind', 'ro', 'nosuid', 'nodev'] },
  ];
}
