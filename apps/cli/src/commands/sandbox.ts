import { readFile, writeFile } from 'node:fs/promises';
import { Command, InvalidArgumentError } from 'commander';
import { sleep } from '#tern/timing';
import type { ExecEvent, SandboxFileList, SandboxList, SandboxPortView, SandboxView, SnapshotView } from '#tern/contracts';
import { secondsArgument } from '../arguments.js';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { ago, bytes } from '../format.js';
import { table } from '../table.js';
import { sandboxShell } from './sandbox-shell.js';

function client() {
  return new ApiClient(resolveContext());
}

const sandboxPath = (id: string, rest = '') => `/api/v1/sandboxes/${encodeURIComponent(id)}${rest}`;

function envArgument(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const at = value.indexOf('=');
  if (at < 1) throw new InvalidArgumentError('must be NAME=VALUE');
  return { ...previous, [value.slice(0, at)]: value.slice(at + 1) };
}

type VolumeOption = { name: string; path: string; read_only?: true };

/** `--volume NAME:/path[:ro]` (repeatable): a workspace volume to mount, read-write unless `:ro`. */
export function volumeArgument(value: string, previous: VolumeOption[] = []): VolumeOption[] {
  const m = /^([^:]+):(\/[^:]*)(?::(ro|rw))?$/.exec(value);
  if (!m) throw new InvalidArgumentError('must be NAME:/path or NAME:/path:ro');
  return [...previous, { name: m[1], path: m[2], ...(m[3] === 'ro' ? { read_only: true as const } : {}) }];
}

function cpuArgument(value: string): number {
  if (!/^\d+(\.\d+)?$/.test(value.trim())) throw new InvalidArgumentError('must be a number of cores, e.g. 0.5 or 2');
  return Number(value);
}

export function renderSandboxes(sandboxes: SandboxView[]): string {
  if (!sandboxes.length) return 'No sandboxes.';
  return table(
    ['SANDBOX', 'STATE', 'MACHINE', 'CPU', 'MEMORY', 'CREATED', 'EXPIRES', 'REASON'],
    sandboxes.map((s) => [
      s.id,
      s.state,
      s.machine ?? '-',
      String(s.cpu),
      bytes(s.memory_bytes),
      ago(s.created_at),
      s.ended_at ? '-' : s.expires_at,
      (s.state_reason ?? '').slice(0, 50),
    ]),
  );
}

/** `<sandbox id>:<path>`, or undefined for a local path. */
function remote(spec: string): { id: string; path: string } | undefined {
  const m = /^(sb-[\w-]+):(.+)$/.exec(spec);
  return m ? { id: m[1], path: m[2] } : undefined;
}

/** Writes an exec's output to this process's stdout and stderr as it comes; resolves the exit. */
async function follow(response: Response): Promise<Extract<ExecEvent, { exit_code: number | null }> | undefined> {
  let pending = '';
  let exit: Extract<ExecEvent, { exit_code: number | null }> | undefined;
  const decoder = new TextDecoder();
  const handle = (line: string) => {
    if (!line) return;
    const event = JSON.parse(line) as ExecEvent;
    if ('stream' in event) (event.stream === 'stderr' ? process.stderr : process.stdout).write(event.data);
    else if ('exit_code' in event) exit = event;
  };
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    pending += decoder.decode(chunk, { stream: true });
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    lines.forEach(handle);
  }
  handle(pending);
  return exit;
}

export function sandboxCommand(): Command {
  const cmd = new Command('sandbox').description('Sandboxes: isolated containers to run code in, driven over the API');
  for (const add of [addCreate, addList, addExec, addCp, addLs, addShell, addExpose, addSnapshot, addRm]) add(cmd);
  return cmd;
}

function addCreate(cmd: Command): void {
  cmd
    .command('create')
    .description('Create a sandbox (POST /api/v1/sandboxes) and print its id once it runs')
    .option('--image <ref>', "host (default) or a registry image: a build, a snapshot (its /workspace becomes the sandbox's)")
    .option('--cpu <cores>', 'cores, e.g. 0.5 (default 1)', cpuArgument)
    .option('--memory <size>', 'e.g. 512Mi, 2Gi (default 512Mi)')
    .option('--timeout <seconds>', 'its lifetime (default 300)', secondsArgument)
    .option('--idle-timeout <seconds>', 'end it after this long without a call', secondsArgument)
    .option('-e, --env <NAME=VALUE>', 'an environment variable (repeatable)', envArgument)
    .option('--workdir <path>', 'where processes start (default /workspace)')
    .option('--pool <pool>', 'the pool to place it in (default "default")')
    .option('--block-network', 'no network at all beyond the sandbox itself')
    .option(
      '--volume <name:/path[:ro]>',
      'a workspace volume to mount (repeatable); read-write ones are committed when it ends',
      volumeArgument,
    )
    .action(async (o) => {
      const spec = {
        ...(o.image ? { image: o.image } : {}),
        ...(o.cpu !== undefined ? { cpu: o.cpu } : {}),
        ...(o.memory ? { memory: o.memory } : {}),
        ...(o.timeout !== undefined ? { timeout: o.timeout } : {}),
        ...(o.idleTimeout !== undefined ? { idle_timeout: o.idleTimeout } : {}),
        ...(o.env ? { env: o.env } : {}),
        ...(o.workdir ? { workdir: o.workdir } : {}),
        ...(o.pool ? { pool: o.pool } : {}),
        ...(o.blockNetwork ? { network: { block: true } } : {}),
        ...(o.volume ? { volumes: o.volume } : {}),
      };
      const api = client();
      let { body } = await api.request<SandboxView>('POST', '/api/v1/sandboxes', spec);
      // 202: still placing (a slow first start); followed until it runs or fails.
      while (body.state === 'placing') {
        await sleep(500);
        ({ body } = await api.get<SandboxView>(sandboxPath(body.id)));
      }
      if (body.state !== 'running') throw new Error(`sandbox ${body.id} ${body.state}: ${body.state_reason ?? 'no reason given'}`);
      process.stdout.write(`${body.id}\n`);
    });
}

function addList(cmd: Command): void {
  cmd
    .command('list')
    .description("The workspace's running sandboxes (--all: ended ones too)")
    .option('--all', 'ended sandboxes too')
    .action(async (o) => {
      const { body } = await client().get<SandboxList>(`/api/v1/sandboxes?live=${o.all ? 'false' : 'true'}`);
      process.stdout.write(`${renderSandboxes(body.sandboxes)}\n`);
    });
}

function addExec(cmd: Command): void {
  cmd
    .command('exec')
    .description("Run a command (after --) or --code in a sandbox; its output streams here and its exit code is this command's")
    .argument('<id>', 'the sandbox')
    .argument('[cmd...]', 'the program and its arguments')
    .option('--code <code>', 'code to run instead of a command')
    .option('--language <language>', 'python (default), node or bash, with --code')
    .option('--cwd <path>', 'working directory')
    .option('--timeout <seconds>', 'kill the process after this long', secondsArgument)
    .action(async (id: string, argv: string[], o) => {
      if (!argv.length && o.code === undefined)
        throw new InvalidArgumentError('give a command (tern sandbox exec <id> -- ls -l) or --code');
      const request = {
        ...(argv.length ? { cmd: argv } : { code: o.code, ...(o.language ? { language: o.language } : {}) }),
        ...(o.cwd ? { cwd: o.cwd } : {}),
        ...(o.timeout !== undefined ? { timeout: o.timeout } : {}),
      };
      const exit = await follow(await client().stream('POST', sandboxPath(id, '/exec'), request));
      if (!exit) throw new Error('the output ended before the process did (connection lost?)');
      if (exit.error) process.stderr.write(`tern: ${exit.error}\n`);
      process.exitCode = exit.exit_code ?? 128 + 9;
    });
}

function addCp(cmd: Command): void {
  cmd
    .command('cp')
    .description('Copy a file into or out of a sandbox: tern sandbox cp ./local <id>:/workspace/f, or <id>:path ./local')
    .argument('<from>')
    .argument('<to>')
    .action(async (from: string, to: string) => {
      const source = remote(from);
      const target = remote(to);
      if (!!source === !!target) throw new InvalidArgumentError('exactly one side must be <sandbox id>:<path>');
      if (target) {
        const data = new Uint8Array(await readFile(from));
        await client().stream('PUT', sandboxPath(target.id, `/files?path=${encodeURIComponent(target.path)}`), data);
        process.stdout.write(`Copied ${bytes(data.length)} to ${to}\n`);
      } else {
        const response = await client().stream('GET', sandboxPath(source!.id, `/files?path=${encodeURIComponent(source!.path)}`));
        const data = new Uint8Array(await response.arrayBuffer());
        await writeFile(to, data);
        process.stdout.write(`Copied ${bytes(data.length)} to ${to}\n`);
      }
    });
}

function addLs(cmd: Command): void {
  cmd
    .command('ls')
    .description("A directory's entries in a sandbox (default its workdir)")
    .argument('<id>', 'the sandbox')
    .argument('[path]', 'the directory', '.')
    .action(async (id: string, path: string) => {
      const { body } = await client().get<SandboxFileList>(sandboxPath(id, `/files/list?path=${encodeURIComponent(path)}`));
      const rows = body.entries.map((e) => [e.mode, e.type, String(e.size), e.mtime, e.name]);
      process.stdout.write(`${rows.length ? table(['MODE', 'TYPE', 'SIZE', 'MODIFIED', 'NAME'], rows) : `${body.path} is empty.`}\n`);
    });
}

function addShell(cmd: Command): void {
  cmd
    .command('shell')
    .description('An interactive shell in a sandbox, on a pty, over a WebSocket (exit or Ctrl-D ends it)')
    .argument('<id>', 'the sandbox')
    .action((id: string) => sandboxShell(resolveContext(), id));
}

function addExpose(cmd: Command): void {
  cmd
    .command('expose')
    .description('Expose a port the sandbox listens on and print its URL on the gateway (HTTP and WebSocket)')
    .argument('<id>', 'the sandbox')
    .argument('<port>', 'the port inside the sandbox')
    .option('--public', 'reachable without a token, at an unguessable URL')
    .action(async (id: string, port: string, o) => {
      const { body } = await client().request<SandboxPortView>('POST', sandboxPath(id, '/ports'), {
        port: Number(port),
        ...(o.public ? { public: true } : {}),
      });
      process.stdout.write(`${body.url}\n`);
    });
}

function addSnapshot(cmd: Command): void {
  cmd
    .command('snapshot')
    .description(
      "Push the sandbox's /workspace, on the image it runs, as an image of the workspace; print its pinned reference (for sandbox create --image, or a deployment's image)",
    )
    .argument('<id>', 'the sandbox')
    .option('--name <name>', 'the image under builds/<workspace>/snapshots/ (default "sandbox")')
    .option('--tag <tag>', 'its tag (default <id>-<ms since epoch>)')
    .action(async (id: string, o: { name?: string; tag?: string }) => {
      const { body } = await client().request<SnapshotView>('POST', sandboxPath(id, '/snapshot'), {
        ...(o.name ? { name: o.name } : {}),
        ...(o.tag ? { tag: o.tag } : {}),
      });
      process.stdout.write(`${body.image}\n`);
    });
}

function addRm(cmd: Command): void {
  cmd
    .command('rm')
    .description('Terminate a sandbox: its processes end, its container and files are removed')
    .argument('<id>', 'the sandbox')
    .action(async (id: string) => {
      const { body } = await client().request<SandboxView>('DELETE', sandboxPath(id));
      process.stdout.write(`Sandbox ${body.id} ${body.state}.\n`);
    });
}
