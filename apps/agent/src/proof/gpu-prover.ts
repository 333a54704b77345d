import { readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import type { HardwareAnswer, HardwareProbe } from '#tern/contracts';
import { memoryToAllocate } from '#tern/proof';
import type { ContainerRuntime, GpuDeviceRef, HostBind, LogLine, RuntimeLogger } from '#tern/runtime';
import { ProverChannel, ProverFailed, type PythonProverCommitted, type PythonProverReady } from './prover-channel.js';
import type { Prover, ProverReady, ProverRequest } from './prover.js';

/** Where the prover's container sees Tern's runners and the agent's socket. */
const RUNNERS_MOUNT = '/tern/runners';
const SOCKET_MOUNT = '/tern/proof';
const SOCKET_NAME = 'prover.sock';
/**
 * PyTorch's import and CUDA context, A and B (2n² bytes), C (4n² bytes) on the host for the tree
 * and on the device: 8 GiB leaves room at n = 8192 (C is 256 MiB, its rows as bytes as much) for
 * any torch build.
 */
const PROVER_MEMORY_BYTES = 8 * 2 ** 30;
/** torch starts a thread per core and more; each counts against pids. */
const PROVER_PIDS = 1024;
/** Labels the agent's reconcile does not adopt: a prover left by a dead agent is killed. */
export const PROVER_LABEL = 'tern.proof.challenge';

export interface GpuProverOptions {
  runtime: ContainerRuntime;
  /** The repository's runners/ (tern_prover.py beside tern_runner.py). */
  runnersDir: string;
  /** The claimed GPU as discovery saw it. */
  gpu: GpuDeviceRef;
  /** A directory of the agent's own for the socket (under its state directory). */
  workDir: string;
  /** The interpreter that has PyTorch (default `python3` of the host image's /usr). */
  python?: string;
  /** Host directories bound read-only at the same path: where that interpreter and its packages live, when outside /usr. */
  pythonDirs?: string[];
  /**
   * The device check's fake GPU (device nodes, no driver): the prover may get ready without CUDA
   * (tern_prover.py refuses a GPU claim without it otherwise) and computes in plain Python, the
   * path certain to miss a GPU band (NumPy's float64 BLAS may not miss it: see bands.ts
   * GPU_PROVER_ROUND_TRIP_MS). Never set by the agent.
   */
  fakeGpu?: boolean;
  logger: RuntimeLogger;
}

/**
 * Proves a GPU from inside a Tern container on it: the runtime starts runners/python/tern_prover.py
 * on the host image with the claimed GPU given to it as to any workload (network `none`, no
 * capabilities, the usual limits), and the agent talks to it over a unix socket it listens on in
 * a directory bound into the container. prepare() starts all that, before the seed exists: the
 * prover imports PyTorch, makes its CUDA context, allocates the product's buffers and the GPU's
 * claimed memory (less libs/proof's MEMORY_MARGIN), and says it is ready; none of it is timed.
 * commit() then sends the seed: the prover computes C on the device, commits, and answers the
 * probe from the product it kept; the container goes when the challenge is answered or dropped.
 */
export class GpuProver implements Prover {
  private readonly containerId: string;
  private server?: Server;
  private socket?: Socket;
  private socketDir?: string;
  private channel?: ProverChannel;
  private started = false;
  /** Ends the wait for the container's exit: it polls the runtime until then. */
  private readonly released = new AbortController();
  /** What the prover said once ready: its backend, the memory it allocated, its start's timings. */
  ready?: PythonProverReady;
  /** What the prover said with its commitment: its backend and timings (logged, and the device check's calibration line). */
  committed?: PythonProverCommitted;

  constructor(
    private readonly challenge: Pick<ProverRequest, 'challengeId' | 'n' | 'claimedMemoryBytes'>,
    private readonly options: GpuProverOptions,
  ) {
    this.containerId = `tern-proof-${challenge.challengeId}`;
  }

  async prepare(): Promise<ProverReady> {
    await mkdir(this.options.workDir, { recursive: true });
    this.socketDir = await mkdtemp(join(this.options.workDir, 'proof-'));
    // The container's user (nobody, or a mapped id under a user namespace) walks in and connects.
    await chmod(this.socketDir, 0o755);
    const { connected } = await this.listen(join(this.socketDir, SOCKET_NAME));
    await chmod(join(this.socketDir, SOCKET_NAME), 0o666);
    const { runtime } = this.options;
    await runtime.start({
      id: this.containerId,
      image: 'host',
      args: [this.options.python ?? 'python3', `${RUNNERS_MOUNT}/python/tern_prover.py`, '--connect', `${SOCKET_MOUNT}/${SOCKET_NAME}`],
      env: {
        PYTHONUNBUFFERED: '1',
        PYTHONDONTWRITEBYTECODE: '1',
        HOME: '/tmp',
        ...(this.options.fakeGpu ? { TERN_PROVER_PRODUCT: 'python', TERN_PROVER_FAKE_GPU: '1' } : {}),
      },
      network: 'none',
      memoryBytes: PROVER_MEMORY_BYTES,
      pidsLimit: PROVER_PIDS,
      binds: this.binds(),
      gpus: { devices: [this.options.gpu] },
      labels: { [PROVER_LABEL]: this.challenge.challengeId },
    });
    this.started = true;
    const exited = runtime.wait(this.containerId, this.released.signal).then(async () => {
      throw new ProverFailed(`the prover's container exited before connecting: ${await this.exitReason()}`);
    });
    // Seen by the race below when it comes first; once connected, the exit is the channel's to explain.
    exited.catch(() => undefined);
    const socket = await Promise.race([connected, exited]);
    this.socket = socket;
    this.channel = new ProverChannel(socket, socket, () => this.exitReason());
    const claimed = this.challenge.claimedMemoryBytes ?? 0;
    this.ready = await this.channel.prepare({ n: this.challenge.n, allocateBytes: memoryToAllocate(claimed), claimedBytes: claimed });
    this.options.logger.info(
      {
        challengeId: this.challenge.challengeId,
        gpu: this.options.gpu.index,
        backend: this.ready.backend,
        allocatedBytes: this.ready.allocatedBytes,
        heldByOthersBytes: this.ready.heldByOthersBytes,
        ...this.ready.timings,
      },
      `the GPU prover is ready (${this.ready.backend})`,
    );
    return { allocatedBytes: this.ready.allocatedBytes };
  }

  async commit(seed: string): Promise<string> {
    if (!this.channel) throw new ProverFailed('the prover is not ready');
    this.committed = await this.channel.commit({ seed, n: this.challenge.n });
    this.options.logger.info(
      { challengeId: this.challenge.challengeId, gpu: this.options.gpu.index, backend: this.committed.backend, ...this.committed.timings },
      `the GPU prover committed (${this.committed.backend})`,
    );
    return this.committed.root;
  }

  async answer(probe: HardwareProbe): Promise<HardwareAnswer> {
    if (!this.channel) throw new ProverFailed('the prover has not committed');
    return this.channel.answer(probe);
  }

  async release(): Promise<void> {
    this.released.abort();
    this.server?.close();
    this.socket?.destroy();
    if (this.started) await this.options.runtime.remove(this.containerId);
    if (this.socketDir) await rm(this.socketDir, { recursive: true, force: true });
  }

  private binds(): HostBind[] {
    return [
      { hostPath: this.options.runnersDir, containerPath: RUNNERS_MOUNT },
      { hostPath: this.socketDir!, containerPath: SOCKET_MOUNT },
      ...(this.options.pythonDirs ?? []).map((dir) => ({ hostPath: dir, containerPath: dir })),
    ];
  }

  /** Listens on `path`; the first connection is the prover's, and the server takes no other. */
  private async listen(path: string): Promise<{ connected: Promise<Socket> }> {
    const server = createServer();
    this.server = server;
    server.maxConnections = 1;
    const connected = new Promise<Socket>((resolve) => {
      server.once('connection', (socket) => {
        server.close();
        resolve(socket);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, resolve);
    });
    // Wrapped: an async function returning the promise itself would wait for the connection.
    return { connected };
  }

  /** The container's exit and the end of its stderr, for the reason the agent answers. */
  private async exitReason(): Promise<string> {
    const lines: LogLine[] = [];
    for await (const line of this.options.runtime.logs(this.containerId, { follow: false })) lines.push(line);
    const exit = await this.options.runtime.wait(this.containerId);
    const tail = lines
      .slice(-5)
      .map((l) => l.line)
      .join(' | ');
    return `exit ${exit.exitCode ?? exit.signal ?? 'unknown'}${tail ? `: ${tail.slice(-600)}` : ''}`;
  }
}

/**
 * The prover's interpreter (AGENT_PROVER_PYTHON, default the host image's `python3`) and the
 * host directories it needs beyond /usr: a virtual environment outside /usr (e.g.
 * /opt/torch/.venv, where PyTorch is installed) and the base interpreter its pyvenv.cfg names.
 */
export function proverPython(env: NodeJS.ProcessEnv = process.env): Pick<GpuProverOptions, 'python' | 'pythonDirs'> {
  const python = env.AGENT_PROVER_PYTHON?.trim();
  if (!python) return {};
  if (!isAbsolute(python)) return { python };
  const prefix = dirname(dirname(python));
  const home = /^home\s*=\s*(.+)$/m.exec(readFileIfAny(join(prefix, 'pyvenv.cfg')))?.[1]?.trim();
  const dirs = [prefix, ...(home ? [dirname(home)] : [])].filter((d) => d !== '/' && d !== '/usr' && !d.startsWith('/usr/'));
  return { python, pythonDirs: [...new Set(dirs)] };
}

function readFileIfAny(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}
