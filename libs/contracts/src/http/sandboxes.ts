/** `GET /api/v1/sandboxes/<id>` (also the create's answer). */
export interface SandboxView {
  id: string;
  state: 'placing' | 'running' | 'terminated' | 'failed' | 'lost';
  state_reason: string | null;
  machine: string | null;
  pool: string;
  image: string;
  workdir: string;
  cpu: number;
  memory_bytes: number;
  gpu_count: number;
  timeout: number;
  idle_timeout: number | null;
  /** Ports exposed through the gateway at `/sandbox/<id>/<port>/`. */
  ports: number[];
  /** Public ports: reached without a token at `/sandbox-public/<token>/` (the workspace's own view shows the paths). */
  public_ports: { port: number; path: string }[];
  created_at: string;
  started_at: string | null;
  active_at: string;
  ended_at: string | null;
  /** When the lifetime ends it. */
  expires_at: string;
}

/** `POST /api/v1/sandboxes/<id>/ports`. */
export interface SandboxPortView {
  port: number;
  /** Where the port answers (HTTP and WebSocket): with the workspace's token, or with none when public. */
  url: string;
  public: boolean;
}

export interface SandboxList {
  sandboxes: SandboxView[];
}

/** One process of a sandbox (`GET …/processes/<pid>`; the list leaves out `output`). */
export interface SandboxProcessView {
  pid: string;
  cmd: string[];
  state: 'running' | 'exited' | 'killed';
  exit_code: number | null;
  signal: string | null;
  started_at: string;
  ended_at: string | null;
  /** What it wrote so far (the last MiB of each stream), in order. */
  output?: { stream: 'stdout' | 'stderr'; data: string }[];
}

/** One line of an exec's NDJSON stream: the pid first, then output as produced, then the exit. */
export type ExecEvent =
  { pid: string } | { stream: 'stdout' | 'stderr'; data: string } | { exit_code: number | null; signal?: string | null; error?: string };

/** `GET …/files/stat` and each entry of `…/files/list`. */
export interface SandboxFileView {
  name: string;
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  /** Permission bits as octal text, e.g. "644". */
  mode: string;
  mtime: string;
}

export interface SandboxFileList {
  path: string;
  entries: SandboxFileView[];
}
