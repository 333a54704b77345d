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
