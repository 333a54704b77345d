import type {
  ExecEvent,
  ExecRequest,
  SandboxFileList,
  SandboxFileView,
  SandboxPortView,
  SandboxSpec,
  SandboxView,
  SnapshotRequest,
  SnapshotView,
} from '../../../libs/contracts/src/index.js';
import { ndjsonLines, type TernHttp } from './http.js';

/** What a finished process wrote and how it ended. */
export interface ExecResult {
  pid: string;
  exit_code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** A file's path as a query parameter. */
const at = (path: string) => `?path=${encodeURIComponent(path)}`;

/** The files of one sandbox, confined to it by its agent. */
export class SandboxFiles {
  constructor(
    private readonly http: TernHttp,
    private readonly base: string,
  ) {}

  async read(path: string): Promise<Uint8Array> {
    return new Uint8Array(await (await this.http.stream('GET', `${this.base}/files${at(path)}`)).arrayBuffer());
  }

  async write(path: string, data: Uint8Array | string): Promise<void> {
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    await (await this.http.stream('PUT', `${this.base}/files${at(path)}`, bytes)).arrayBuffer();
  }

  async list(path = '.'): Promise<SandboxFileView[]> {
    return (await this.http.get<SandboxFileList>(`${this.base}/files/list${at(path)}`)).body.entries;
  }

  async stat(path: string): Promise<SandboxFileView> {
    return (await this.http.get<SandboxFileView>(`${this.base}/files/stat${at(path)}`)).body;
  }

  async mkdir(path: string): Promise<void> {
    await this.http.request('POST', `${this.base}/files/mkdir${at(path)}`);
  }

  async remove(path: string): Promise<void> {
    await this.http.request('DELETE', `${this.base}/files${at(path)}`);
  }
}

/** A long-lived container driven over the API: processes, files, ports. */
export class Sandbox {
  readonly files: SandboxFiles;
  private readonly base: string;

  constructor(
    private readonly http: TernHttp,
    public view: SandboxView,
  ) {
    this.base = `/api/v1/sandboxes/${encodeURIComponent(view.id)}`;
    this.files = new SandboxFiles(http, this.base);
  }

  get id(): string {
    return this.view.id;
  }

  /** Places a sandbox and answers once it runs (503 when no machine can take it now). */
  static async create(http: TernHttp, spec: Partial<SandboxSpec> = {}): Promise<Sandbox> {
    return new Sandbox(http, (await http.request<SandboxView>('POST', '/api/v1/sandboxes', spec)).body);
  }

  static async get(http: TernHttp, id: string): Promise<Sandbox> {
    return new Sandbox(http, (await http.get<SandboxView>(`/api/v1/sandboxes/${encodeURIComponent(id)}`)).body);
  }

  /** A process's events as it runs: its pid, then its output, then its exit. */
  async *stream(request: Partial<ExecRequest>): AsyncGenerator<ExecEvent> {
    yield* ndjsonLines<ExecEvent>(await this.http.stream('POST', `${this.base}/exec`, request));
  }

  /** Runs a command (`['ls', '-l']`) or `{ code, language }` to its end; `onOutput` hears output as it comes. */
  async exec(
    request: string[] | Partial<ExecRequest>,
    onOutput?: (stream: 'stdout' | 'stderr', data: string) => void,
  ): Promise<ExecResult> {
    const result: ExecResult = { pid: '', exit_code: null, signal: null, stdout: '', stderr: '' };
    for await (const event of this.stream(Array.isArray(request) ? { cmd: request } : request)) {
      if ('pid' in event) result.pid = event.pid;
      else if ('stream' in event) {
        result[event.stream] += event.data;
        onOutput?.(event.stream, event.data);
      } else {
        result.exit_code = event.exit_code;
        result.signal = event.signal ?? null;
        if (event.error) result.stderr += event.error;
      }
    }
    return result;
  }

  /** Runs code in the language's interpreter (python, node, bash). */
  runCode(code: string, language: ExecRequest['language'] = 'python', options: Partial<ExecRequest> = {}): Promise<ExecResult> {
    return this.exec({ ...options, code, language });
  }

  /** Makes a port the sandbox listens on reachable at the answer's url (with the workspace token). */
  async exposePort(port: number): Promise<SandboxPortView> {
    return (await this.http.request<SandboxPortView>('POST', `${this.base}/ports`, { port })).body;
  }

  /** Its /workspace, on the image it runs, as an image of the workspace; `image` (pinned) starts a new sandbox or a deployment. */
  async snapshot(options: SnapshotRequest = {}): Promise<SnapshotView> {
    // The gateway answers within 300 s (the snapshot's own limit): the read waits past it.
    return (await (await this.http.stream('POST', `${this.base}/snapshot`, options, { timeoutMs: 330_000 })).json()) as SnapshotView;
  }

  async refresh(): Promise<SandboxView> {
    return (this.view = (await this.http.get<SandboxView>(this.base)).body);
  }

  async terminate(): Promise<SandboxView> {
    return (this.view = (await this.http.request<SandboxView>('DELETE', this.base)).body);
  }
}
