import type { SandboxFileList, SandboxFileView } from '#tern/contracts';
import { InvokeError } from '#tern/messaging';
import type { RuncRuntime } from '#tern/runtime';

/**
 * The files API, run inside the sandbox's container with `runc exec` as the sandbox's own
 * user: paths resolve in its mount namespace, so a symlink or `..` can only lead to what the
 * sandbox itself sees (its root, its /workspace), never to the machine's files. The gateway
 * refuses `..` segments before a call gets here.
 *
 * Each script ends with a status the caller maps to HTTP: 44 missing, 45 wrong type, 46 denied.
 */
const SCRIPT = {
  // -e follows symlinks: a link to nothing the sandbox can see is missing.
  check: `[ -e "$1" ] || exit 44; [ -d "$1" ] && exit 45; [ -r "$1" ] || exit 46; exit 0`,
  read: `exec cat -- "$1"`,
  write: `[ -d "$1" ] && exit 45; d=$(dirname -- "$1"); mkdir -p -- "$d" 2>/dev/null; [ -d "$d" ] || exit 45; [ -w "$d" ] || exit 46; cat > "$1"`,
  remove: `[ -e "$1" ] || [ -L "$1" ] || exit 44; rm -rf -- "$1"`,
  mkdir: `[ -e "$1" ] && ! [ -d "$1" ] && exit 45; mkdir -p -- "$1"`,
  // %y type, %s size, %m mode (octal), %T@ mtime (s), %f name; NUL-separated so any name survives.
  stat: `[ -e "$1" ] || [ -L "$1" ] || exit 44; exec find "$1" -maxdepth 0 -printf '%y\\t%s\\t%m\\t%T@\\t%f\\0'`,
  list: `[ -e "$1" ] || exit 44; [ -d "$1" ] || exit 45; exec find "$1" -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%m\\t%T@\\t%f\\0'`,
} as const;

const TYPES: Record<string, SandboxFileView['type']> = { f: 'file', d: 'directory', l: 'symlink' };

function failure(status: number, path: string, what: string, stderr: string): InvokeError {
  if (status === 44) return new InvokeError(404, `${path}: no such file or directory in the sandbox`);
  if (status === 45)
    return new InvokeError(400, `${path}: ${what === 'list' ? 'not a directory' : 'is a directory, or its parent is not one'}`);
  if (status === 46) return new InvokeError(403, `${path}: permission denied inside the sandbox`);
  return new InvokeError(400, `${what} ${path} failed (status ${status}): ${stderr.trim().slice(0, 500) || 'no message'}`);
}

export class SandboxFiles {
  constructor(
    private readonly runtime: RuncRuntime,
    private readonly containerId: string,
  ) {}

  /** Runs one script; stdout collected up to `limit` bytes. */
  private async run(what: keyof typeof SCRIPT, path: string, input?: Uint8Array): Promise<Buffer> {
    const child = this.runtime.exec(this.containerId, { args: ['sh', '-c', SCRIPT[what], 'sh', path] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on('data', (c: Buffer) => out.push(c));
    child.stderr!.on('data', (c: Buffer) => err.push(c));
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(input ?? new Uint8Array());
    const result = await child;
    if (result.exitCode !== 0) throw failure(Number(result.exitCode), path, what, Buffer.concat(err).toString('utf8'));
    return Buffer.concat(out);
  }

  /** The file's bytes, streamed: checked first so a missing file is a 404 before any byte goes. */
  async read(path: string): Promise<AsyncIterable<Uint8Array>> {
    await this.run('check', path);
    const child = this.runtime.exec(this.containerId, { args: ['sh', '-c', SCRIPT.read, 'sh', path] });
    child.stdin!.end();
    void child.catch(() => undefined);
    return child.stdout! as AsyncIterable<Uint8Array>;
  }

  async write(path: string, bytes: Uint8Array): Promise<void> {
    await this.run('write', path, bytes);
  }

  async remove(path: string): Promise<void> {
    await this.run('remove', path);
  }

  async mkdir(path: string): Promise<void> {
    await this.run('mkdir', path);
  }

  async stat(path: string): Promise<SandboxFileView> {
    const [entry] = parseEntries(await this.run('stat', path), path, true);
    if (!entry) throw new InvokeError(404, `${path}: no such file or directory in the sandbox`);
    return entry;
  }

  async list(path: string): Promise<SandboxFileList> {
    const entries = parseEntries(await this.run('list', path), path, false).sort((a, b) => a.name.localeCompare(b.name));
    return { path, entries };
  }
}

/** find's NUL-separated `type\tsize\tmode\tmtime\tname` records. */
function parseEntries(out: Buffer, dir: string, self: boolean): SandboxFileView[] {
  return out
    .toString('utf8')
    .split('\0')
    .filter(Boolean)
    .map((record) => {
      const [type, size, mode, mtime, ...rest] = record.split('\t');
      const name = rest.join('\t');
      return {
        name,
        path: self ? dir : `${dir.replace(/\/+$/, '')}/${name}`,
        type: TYPES[type] ?? 'other',
        size: Number(size),
        mode,
        mtime: new Date(Number(mtime) * 1000).toISOString(),
      };
    });
}
