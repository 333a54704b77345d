import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import {
  ImageStore,
  RuncRuntime,
  type ContainerRuntime,
  type ImageStoreOptions,
  type LogLine,
  type RuncRuntimeOptions,
} from '#tern/runtime';

// Which of these tests may run here (root, runc, umoci, python3) is decided by describeNeeding
// (test/support/real-parts.ts): skipped on a developer's machine, failed under CI=true.

export function containerId(name: string): string {
  return `tt-${randomBytes(3).toString('hex')}-${name}`;
}

/** A private runtime: its own runc root, bundles, volumes and image cache in a temp dir. */
export class RuntimeSandbox {
  private constructor(
    readonly dir: string,
    readonly images: ImageStore,
    readonly runtime: RuncRuntime,
  ) {}

  static async create(
    options: Partial<RuncRuntimeOptions> = {},
    imageOptions: Omit<ImageStoreOptions, 'root'> = {},
  ): Promise<RuntimeSandbox> {
    const dir = await mkdtemp(join(tmpdir(), 'tern-rt-'));
    const images = new ImageStore({ ...imageOptions, root: join(dir, 'images') });
    return new RuntimeSandbox(dir, images, new RuncRuntime({ ...options, stateDir: join(dir, 'state'), images }));
  }

  get stateDir(): string {
    return join(this.dir, 'state');
  }

  get volumeRoot(): string {
    return join(this.dir, 'state', 'volumes');
  }

  /** Another instance over the same state, as an agent restarted after a crash would be. */
  newInstance(): RuncRuntime {
    return new RuncRuntime({ stateDir: this.stateDir, images: this.images });
  }

  /** Removes every container under this sandbox's runc root, then the directory. */
  async destroy(): Promise<void> {
    for (const c of await this.runtime.list().catch(() => [])) await this.runtime.remove(c.id).catch(() => undefined);
    // Last resort for anything list() could not attribute (no bundle, no annotations).
    const root = this.runtime.runcRoot;
    const r = await execa('runc', ['--root', root, 'list', '-q'], { reject: false });
    for (const id of r.stdout.split('\n').filter(Boolean))
      await execa('runc', ['--root', root, 'delete', '--force', id], { reject: false });
    await rm(this.dir, { recursive: true, force: true });
  }
}

export async function collectLogs(runtime: ContainerRuntime, id: string): Promise<LogLine[]> {
  const lines: LogLine[] = [];
  for await (const line of runtime.logs(id, { follow: true })) lines.push(line);
  return lines;
}

export async function isRunning(root: string, id: string): Promise<boolean> {
  const r = await execa('runc', ['--root', root, 'state', id], { reject: false });
  return r.exitCode === 0 && (JSON.parse(r.stdout) as { status: string }).status === 'running';
}
