/** A process to start inside a running container (`runc exec`). */
export interface ExecSpec {
  args: string[];
  /** Added to the container's own environment. */
  env?: Record<string, string>;
  cwd?: string;
  /** runc writes the process's host pid here, so it can be signalled. */
  pidFile?: string;
}

/**
 * `runc exec` arguments: the process joins the container's namespaces, cgroup, user,
 * capabilities and seccomp profile (runc starts from the container's own process spec), so it
 * is confined exactly as the container's first process is.
 */
export function runcExecArgs(root: string, id: string, spec: ExecSpec): string[] {
  const args = ['--root', root, 'exec'];
  if (spec.cwd) args.push('--cwd', spec.cwd);
  for (const [k, v] of Object.entries(spec.env ?? {})) args.push('--env', `${k}=${v}`);
  if (spec.pidFile) args.push('--pid-file', spec.pidFile);
  args.push(id, ...spec.args);
  return args;
}

/** Bytes of one output chunk file of a supervised exec: each stream keeps its last two (see SUPERVISED_EXEC_SCRIPT). */
export const EXEC_OUTPUT_CHUNK_BYTES = 2 ** 20;

/**
 * The files a supervised exec leaves in its directory, so that an agent started after the one
 * that started it can follow it: the output in numbered chunks (`stdout.000000`, …), the exit
 * status once it has ended, the supervisor's pid while it may still run.
 */
export const EXEC_FILES = {
  supervisorPid: 'supervisor.pid',
  exit: 'exit',
  chunk: (stream: 'stdout' | 'stderr', index: number) => `${stream}.${String(index).padStart(6, '0')}`,
} as const;

/**
 * Run by split for each new output chunk ($FILE): removes the chunk two before it, so a stream
 * holds at most two chunks on disk whoever (if anyone) reads it, then writes the chunk.
 */
const CHUNK_FILTER =
  // Builtins but for cat (its start delays a chunk's first bytes); leading zeros stripped, or they would read as octal.
  'n=${FILE##*.}; n=${n#"${n%%[!0]*}"}; n=$((${n:-0} - 2)); [ "$n" -ge 0 ] && rm -f "${FILE%.*}.$(printf %06d "$n")"; exec cat >"$FILE"';

/**
 * The supervisor of an exec: `runc exec` in its own session (the agent's death does not touch
 * it), its stdout and stderr each through `split` into bounded chunk files, then its exit status
 * to a file (one line, in one write), written after both streams are on disk. Arguments: the directory, then runc's.
 */
export const SUPERVISED_EXEC_SCRIPT = [
  'dir="$1"; chunk="$2"; filter="$3"; shift 3',
  `echo "$$" >"$dir/${EXEC_FILES.supervisorPid}"`,
  '{ { "$@" 2>&1 1>&3 3>&-; echo "$?" >"$dir/status"; } | split -b "$chunk" -a 6 -d --filter="$filter" - "$dir/stderr." 3>&-; } 3>&1 \\',
  '  | split -b "$chunk" -a 6 -d --filter="$filter" - "$dir/stdout."',
  // Builtins, not mv (a process's start costs tens of ms on a loaded machine): a reader takes the file once its line ends.
  `read -r status <"$dir/status"; echo "$status" >"$dir/${EXEC_FILES.exit}"`,
].join('\n');

/** The supervisor's arguments after `sh -c SUPERVISED_EXEC_SCRIPT`. */
export function supervisedExecArgs(dir: string, runc: string, runcArgs: string[]): string[] {
  return ['tern-exec', dir, String(EXEC_OUTPUT_CHUNK_BYTES), CHUNK_FILTER, runc, ...runcArgs];
}
