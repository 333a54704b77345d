import { ExecRequest, execArgs, type InvokeHead, type SandboxProcessView, ShellResize, StdinRequest } from '#tern/contracts';
import { type InvokeHandler, type InvokeHandlerResult, InvokeError } from '#tern/messaging';
import { forwardToContainer } from '../invoke/forward.js';
import { bodyOf } from '../invoke/json-body.js';
import type { HostedSandbox } from './hosted-sandbox.js';

const JSON_HEADERS = { 'content-type': 'application/json' };

function json(status: number, value: unknown): InvokeHandlerResult {
  return { status, headers: JSON_HEADERS, body: Buffer.from(JSON.stringify(value)) };
}

function pathParam(url: URL): string {
  const path = url.searchParams.get('path');
  if (!path) throw new InvokeError(400, 'path is required (?path=/workspace/file.txt)');
  return path;
}

/** NDJSON of an exec's events, one JSON object a line. */
async function* ndjson(events: AsyncIterable<unknown>): AsyncGenerator<Uint8Array> {
  for await (const e of events) yield Buffer.from(`${JSON.stringify(e)}\n`);
}

/**
 * The sandbox API as the agent answers it on SANDBOX_CALL (see its description for the routes).
 * The gateway has already checked the caller's workspace and the path's shape.
 */
export function sandboxRouter(sandbox: HostedSandbox): InvokeHandler {
  return async (head: InvokeHead, body: Uint8Array, signal: AbortSignal): Promise<InvokeHandlerResult> => {
    const url = new URL(head.path, 'http://sandbox');
    const parts = url.pathname.split('/').filter(Boolean);
    const [first, second, third] = parts;
    if (first === 'ports') return forwardToPort(sandbox, second, head, body, signal);
    const param = second && { processes: ':pid', shells: ':tunnel' }[first];
    const route = `${head.method} /${[first, param || second, third].filter(Boolean).join('/')}`;
    const process = () => {
      const p = sandbox.process(parts[1]);
      if (!p) throw new InvokeError(404, `process ${parts[1]} not found in sandbox ${sandbox.id}`);
      return p;
    };
    switch (route) {
      case 'POST /exec': {
        const request = await bodyOf(ExecRequest, body);
        const args = execArgs(request);
        if (!args.ok) throw new InvokeError(400, args.reason);
        const started = await sandbox.exec(args.args, request, head.timeoutMs);
        return {
          status: 200,
          headers: { 'content-type': 'application/x-ndjson', 'x-tern-process-id': started.pid },
          body: ndjson(started.events(signal)),
        };
      }
      case 'GET /processes':
        return json(200, { processes: sandbox.processes().map((p): SandboxProcessView => p.view(false)) });
      case 'GET /processes/:pid':
        return json(200, process().view(true));
      case 'POST /processes/:pid/stdin': {
        const request = await bodyOf(StdinRequest, body);
        const p = process();
        if (!p.write(request.data)) throw new InvokeError(409, `process ${p.pid} has ended or closed its stdin`);
        if (request.close) p.closeStdin();
        return json(200, { pid: p.pid, written: Buffer.byteLength(request.data) });
      }
      case 'DELETE /processes/:pid': {
        const p = process();
        if (!(await p.kill('SIGKILL'))) throw new InvokeError(409, `process ${p.pid} has already ended`);
        await p.ended();
        return json(200, p.view(false));
      }
      case 'POST /shells/:tunnel/resize': {
        const size = await bodyOf(ShellResize, body);
        const tunnel = second ?? '';
        if (!/^[\w-]{1,64}$/.test(tunnel)) throw new InvokeError(400, `"${tunnel}" is not a tunnel id`);
        await sandbox.resizeShell(tunnel, size);
        return json(200, { tunnel, ...size });
      }
      case 'GET /files':
        return { status: 200, headers: { 'content-type': 'application/octet-stream' }, body: await sandbox.files.read(pathParam(url)) };
      case 'PUT /files': {
        const path = pathParam(url);
        await sandbox.files.write(path, body);
        return json(201, { path, size: body.length });
      }
      case 'DELETE /files': {
        const path = pathParam(url);
        await sandbox.files.remove(path);
        return json(200, { path, deleted: true });
      }
      case 'GET /files/list':
        return json(200, await sandbox.files.list(pathParam(url)));
      case 'GET /files/stat':
        return json(200, await sandbox.files.stat(pathParam(url)));
      case 'POST /files/mkdir': {
        const path = pathParam(url);
        await sandbox.files.mkdir(path);
        return json(201, { path, created: true });
      }
      default:
        throw new InvokeError(404, `no sandbox route ${head.method} ${url.pathname}`);
    }
  };
}

/**
 * `/ports/<port>/<rest>`: the request passed on to `<sandbox address>:<port>/<rest>` inside the
 * sandbox's own network namespace. Only on the private network: with the host's network a port
 * would be the machine's own.
 */
function forwardToPort(sandbox: HostedSandbox, port: string | undefined, head: InvokeHead, body: Uint8Array, signal: AbortSignal) {
  const number = Number(port);
  if (!Number.isInteger(number) || number < 1 || number > 65535) throw new InvokeError(400, `port must be 1-65535 (got ${port})`);
  if (!sandbox.address)
    throw new InvokeError(501, "this machine runs containers on the host's network: sandbox ports are not offered there");
  const rest = head.path.replace(/^\/ports\/[^/?]+/, '') || '/';
  return forwardToContainer(
    { host: sandbox.address, port: number },
    { ...head, path: rest.startsWith('/') ? rest : `/${rest}` },
    body,
    signal,
  );
}
