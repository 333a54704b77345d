import type {
  CallView,
  DeletedImage,
  DeploymentDetail,
  DeploymentSpec,
  DeployResult,
  SandboxSpec,
  SubmittedTask,
  TaskView,
  WorkspaceDeleted,
} from '../../../libs/contracts/src/index.js';
import { FunctionCalls, routeOf, type TaskOverrides, Tasks } from './calls.js';
import { resolveConnection, type TernConnection } from './config.js';
import { apiError } from './errors.js';
import { type Input, parseJson, TernHttp } from './http.js';
import { type MapInputs, type MapOptions, Maps } from './maps.js';
import { Sandbox } from './sandboxes.js';

export interface InvokeOptions {
  version?: number;
  /** A path after the endpoint, e.g. `/generate`. */
  path?: string;
  /** Give up after this long; default 300 s. */
  timeoutMs?: number;
  /** The type of a body given as bytes (default application/octet-stream). */
  contentType?: string;
}

/**
 * Tern's public API, typed: deploy, invoke an endpoint, run/spawn a function, put a task and wait
 * for it, map server-side, drive sandboxes. `http` is the transport underneath for anything else.
 */
export class TernClient {
  readonly http: TernHttp;
  readonly calls: FunctionCalls;
  readonly tasks: Tasks;
  readonly maps: Maps;

  /** The connection given, else TERN_GATEWAY / TERN_TOKEN, else ~/.tern/config.json's current context. */
  constructor(connection: TernConnection = resolveConnection()) {
    this.http = new TernHttp(connection);
    this.calls = new FunctionCalls(this.http);
    this.tasks = new Tasks(this.http);
    this.maps = new Maps(this.http);
  }

  /** A new version of a deployment (its code uploaded first with uploadCode when it has a handler). */
  async deploy(spec: Partial<DeploymentSpec> & Record<string, unknown>): Promise<DeployResult> {
    return (await this.http.request<DeployResult>('POST', '/api/v1/deployments', spec)).body;
  }

  async deployment(name: string): Promise<DeploymentDetail> {
    return (await this.http.get<DeploymentDetail>(`/api/v1/deployments/${encodeURIComponent(name)}`)).body;
  }

  /** Whether the gateway holds a code bundle (by its sha256 digest) already. */
  async hasCode(digest: string): Promise<boolean> {
    const head = await this.http.send('HEAD', `/api/v1/code/${digest}`);
    if (head.ok || head.status === 404) return head.ok;
    throw apiError(head.status, `${head.status} checking code ${digest}`);
  }

  /** Uploads a code bundle (tar.gz) under its sha256 digest, which the gateway checks. */
  async uploadCode(digest: string, bundle: Uint8Array): Promise<void> {
    await this.http.request('PUT', `/api/v1/code/${digest}`, bundle);
  }

  /** An endpoint's raw answer (any status below 400), to read as it streams. */
  endpoint(name: string, body: object | Uint8Array, options: InvokeOptions = {}): Promise<Response> {
    const path = options.path && !options.path.startsWith('/') ? `/${options.path}` : (options.path ?? '');
    return this.http.stream('POST', `${routeOf('endpoint', name, options.version)}${path}`, body, {
      timeoutMs: options.timeoutMs ?? 300_000,
      contentType: options.contentType,
    });
  }

  /** Calls an endpoint with a JSON body; its answer's JSON (or text). */
  async invoke<T = unknown>(name: string, body: object = {}, options: InvokeOptions = {}): Promise<T> {
    return parseJson(await (await this.endpoint(name, body, options)).text()) as T;
  }

  /** Calls a function once and answers its result. */
  run<T = unknown>(
    name: string,
    input: Input = {},
    options: TaskOverrides & { version?: number; timeoutSeconds?: number } = {},
  ): Promise<T> {
    return this.calls.run<T>(name, input, options);
  }

  /** Starts a function call without waiting; `wait(call_id)` later. */
  spawn(name: string, input: Input = {}, options: TaskOverrides & { version?: number } = {}): Promise<CallView> {
    return this.calls.spawn(name, input, options);
  }

  /** Submits a task to a task queue. */
  put(name: string, input: Input = {}, options: TaskOverrides & { version?: number } = {}): Promise<SubmittedTask> {
    return this.tasks.put(name, input, options);
  }

  /** A task once it ends (or as it is after `timeoutSeconds`). */
  wait(taskId: string, timeoutSeconds?: number): Promise<TaskView> {
    return this.tasks.wait(taskId, timeoutSeconds);
  }

  /** Maps a function over inputs server-side; each result in order as it arrives. */
  map<T = unknown>(name: string, inputs: MapInputs, options?: MapOptions & { onProgress?: (done: number, total: number) => void }) {
    return this.maps.map<T>(name, inputs, options);
  }

  /**
   * Deletes an image from Tern's registry (`tern image rm`): a workspace admin its own builds, the
   * operator any; refused while a deployment or a live sandbox runs it.
   */
  async deleteImage(ref: string): Promise<DeletedImage> {
    return (await this.http.request<DeletedImage>('DELETE', `/api/v1/images?ref=${encodeURIComponent(ref)}`)).body;
  }

  /** Deletes a workspace and what it holds, its usage kept (`tern workspace rm`; an operator token). */
  async deleteWorkspace(id: string): Promise<WorkspaceDeleted> {
    return (await this.http.request<WorkspaceDeleted>('DELETE', `/api/v1/workspaces/${encodeURIComponent(id)}`)).body;
  }

  /** A new sandbox, running. */
  sandbox(spec: Partial<SandboxSpec> = {}): Promise<Sandbox> {
    return Sandbox.create(this.http, spec);
  }
}
