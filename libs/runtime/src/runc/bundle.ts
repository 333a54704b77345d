import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OciSpec } from '../oci/oci-spec.js';
import type { ImageInfo } from '../types.js';

/** Annotations in config.json: the container's own record of what Tern knows about it. */
export const ANNOTATION = {
  managed: 'dev.tern.managed',
  image: 'dev.tern.image',
  imageDigest: 'dev.tern.image.digest',
  labels: 'dev.tern.labels',
  port: 'dev.tern.port',
  address: 'dev.tern.address',
  created: 'dev.tern.created',
} as const;

/**
 * One container's directory, `<stateDir>/containers/<id>`: the OCI bundle plus what the shim
 * and runc leave behind, so a restarted agent can learn everything from disk.
 */
export class Bundle {
  constructor(readonly dir: string) {}

  get config() {
    return join(this.dir, 'config.json');
  }
  get stdout() {
    return join(this.dir, 'stdout.log');
  }
  get stderr() {
    return join(this.dir, 'stderr.log');
  }
  /** runc's own log (--log). */
  get runcLog() {
    return join(this.dir, 'runc.log');
  }
  /** Written by runc (--pid-file) once the container's process runs. */
  get pidFile() {
    return join(this.dir, 'container.pid');
  }
  /** The shim's pid, to tell a live shim from a lost one. */
  get shimPidFile() {
    return join(this.dir, 'shim.pid');
  }
  /** Written by the shim when `runc run` returns: its exit status. */
  get exitFile() {
    return join(this.dir, 'exit');
  }
  /** The ExitResult, once worked out (exit status + OOM counters), so it survives runc delete. */
  get resultFile() {
    return join(this.dir, 'result.json');
  }

  async readConfig(): Promise<OciSpec | undefined> {
    try {
      return JSON.parse(await readFile(this.config, 'utf8')) as OciSpec;
    } catch {
      return undefined;
    }
  }
}

export function annotationsFor(options: {
  image: ImageInfo;
  labels: Record<string, string>;
  port?: number;
  address?: string;
  created: string;
}): Record<string, string> {
  return {
    [ANNOTATION.managed]: 'true',
    [ANNOTATION.image]: options.image.ref,
    [ANNOTATION.imageDigest]: options.image.digest,
    [ANNOTATION.labels]: JSON.stringify(options.labels),
    ...(options.port !== undefined ? { [ANNOTATION.port]: String(options.port) } : {}),
    ...(options.address ? { [ANNOTATION.address]: options.address } : {}),
    [ANNOTATION.created]: options.created,
  };
}

export function parseAnnotations(
  a: Record<string, string> | undefined,
): { image: ImageInfo; labels: Record<string, string>; port?: number; address?: string; created: string } | undefined {
  if (a?.[ANNOTATION.managed] !== 'true') return undefined;
  let labels: Record<string, string> = {};
  try {
    labels = JSON.parse(a[ANNOTATION.labels] ?? '{}') as Record<string, string>;
  } catch {
    // A hand-edited config; the container is still ours.
  }
  const port = a[ANNOTATION.port] ? Number(a[ANNOTATION.port]) : undefined;
  return {
    image: { ref: a[ANNOTATION.image] ?? '', digest: a[ANNOTATION.imageDigest] ?? '' },
    labels,
    ...(port !== undefined ? { port } : {}),
    ...(a[ANNOTATION.address] ? { address: a[ANNOTATION.address] } : {}),
    created: a[ANNOTATION.created] ?? '',
  };
}

/**
 * The shim: `runc run` in the foreground, in its own session (so the agent's death or its
 * terminal's hang-up does not touch it), stdio to files, then the exit status to a file.
 * --keep leaves the container (and its memory cgroup) until `runc delete`, so OOM counters
 * can still be read after the process is gone. Arguments: runc, root, bundle, id.
 */
export const SHIM_SCRIPT = [
  'runc="$1"; root="$2"; bundle="$3"; id="$4"',
  '"$runc" --root "$root" --log "$bundle/runc.log" run --keep --bundle "$bundle" --pid-file "$bundle/container.pid" "$id" \\',
  '  </dev/null >>"$bundle/stdout.log" 2>>"$bundle/stderr.log"',
  'status=$?',
  'echo "$status" > "$bundle/exit.tmp" && mv "$bundle/exit.tmp" "$bundle/exit"',
].join('\n');
