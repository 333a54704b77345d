import { Command } from 'commander';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, stat } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApiClient, ApiError } from '../api-client.js';
import { type CliContext, resolveContext } from '../cli-config.js';
import { ago, bytes } from '../format.js';
import { table } from '../table.js';

interface VolumeView {
  name: string;
  version: number;
  files: number;
  bytes: number;
  updatedAt: string;
}

interface VolumeList {
  volumes: VolumeView[];
  usage: { bytes: number; files: number; quotaBytes: number; quotaFiles: number };
}

interface Listing {
  path: string;
  directories: { path: string; files: number }[];
  files: { path: string; size: number; mode: string; mtime: string }[];
}

function filesPath(name: string, remote: string): string {
  return `/api/v1/volumes/${encodeURIComponent(name)}/files?path=${encodeURIComponent(remote)}`;
}

export function renderVolumes(list: VolumeList): string {
  const rows = list.volumes.map((v) => [v.name, String(v.files), bytes(v.bytes), String(v.version), ago(v.updatedAt)]);
  const { usage } = list;
  return `${table(['NAME', 'FILES', 'SIZE', 'VERSION', 'UPDATED'], rows)}\nstored ${bytes(usage.bytes)} of ${bytes(usage.quotaBytes)}, ${usage.files} of ${usage.quotaFiles} files`;
}

export function renderListing(listing: Listing): string {
  return table(
    ['PATH', 'SIZE', 'MODE', 'MODIFIED'],
    [
      ...listing.directories.map((d) => [`${d.path}/`, `${d.files} files`, '-', '-']),
      ...listing.files.map((f) => [f.path, bytes(f.size), f.mode, ago(f.mtime)]),
    ],
  );
}

/** Counts bytes through a stream and writes a progress line to stderr at most once a second. */
function progress(label: string, total: number | undefined): Transform {
  let done = 0;
  let last = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, callback) {
      done += chunk.length;
      if (process.stderr.isTTY && Date.now() - last > 1000) {
        last = Date.now();
        process.stderr.write(`\r${label}: ${bytes(done)}${total ? ` of ${bytes(total)}` : ''}   `);
      }
      callback(null, chunk);
    },
    flush(callback) {
      if (process.stderr.isTTY && last) process.stderr.write('\n');
      callback();
    },
  });
}

async function refusal(response: Response): Promise<ApiError> {
  const body = (await response.json().catch(() => undefined)) as { message?: unknown } | undefined;
  const message = Array.isArray(body?.message) ? body.message.join('; ') : String(body?.message ?? response.statusText);
  return new ApiError(response.status, `${response.status} ${message}`, body);
}

async function send(ctx: CliContext, method: string, path: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(`${ctx.gateway}${path}`, {
      ...init,
      method,
      headers: { ...(ctx.token ? { authorization: `Bearer ${ctx.token}` } : {}), ...(init.headers as Record<string, string>) },
    });
  } catch (e) {
    throw new ApiError(0, `cannot reach the gateway at ${ctx.gateway} (${String((e as Error).cause ?? (e as Error).message)})`);
  }
}

/** Streams a local file into the volume (the gateway stores it chunk by chunk). */
export async function putFile(ctx: CliContext, name: string, local: string, remote: string, mode?: string): Promise<unknown> {
  const { size } = await stat(local);
  const body = Readable.toWeb(createReadStream(local).pipe(progress(`put ${remote}`, size))) as ReadableStream<Uint8Array>;
  const response = await send(ctx, 'PUT', `${filesPath(name, remote)}${mode ? `&mode=${mode}` : ''}`, {
    body,
    headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
    duplex: 'half',
  } as RequestInit);
  if (!response.ok) throw await refusal(response);
  return response.json();
}

/** Streams a file of the volume to `local` (written beside it, then renamed: no half file on failure). */
export async function getFile(ctx: CliContext, name: string, remote: string, local: string): Promise<number> {
  const response = await send(ctx, 'GET', filesPath(name, remote));
  if (!response.ok || !response.body) throw await refusal(response);
  const total = Number(response.headers.get('content-length')) || undefined;
  const partial = `${local}.tern-partial`;
  await pipeline(Readable.fromWeb(response.body as never), progress(`get ${remote}`, total), createWriteStream(partial));
  await rename(partial, local);
  return (await stat(local)).size;
}

export function volumeCommand(): Command {
  const ctx = () => resolveContext();
  const client = () => new ApiClient(ctx());
  const volume = new Command('volume').description(
    "Volumes: the workspace's named file trees, mounted into containers by a spec's volumes:",
  );

  volume
    .command('create')
    .argument('<name>', 'lower-case letters, digits or -')
    .description('Create an empty volume')
    .action(async (name: string) => {
      await client().request('POST', '/api/v1/volumes', { name });
      console.log(`volume ${name} created`);
    });

  volume
    .command('list')
    .description("The workspace's volumes with their files and sizes, and its quota")
    .option('--json', 'print the raw JSON')
    .action(async (opts: { json?: boolean }) => {
      const { body } = await client().get<VolumeList>('/api/v1/volumes');
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderVolumes(body));
    });

  volume
    .command('ls')
    .argument('<name>')
    .argument('[path]', 'a directory or file inside the volume', '')
    .option('--json', 'print the raw JSON')
    .description('Files and directories of a volume')
    .action(async (name: string, path: string, opts: { json?: boolean }) => {
      const { body } = await client().get<Listing>(`/api/v1/volumes/${encodeURIComponent(name)}/ls?path=${encodeURIComponent(path)}`);
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderListing(body));
    });

  volume
    .command('put')
    .argument('<name>')
    .argument('<local>', 'a local file')
    .argument('<remote>', 'its path inside the volume')
    .option('--mode <octal>', 'permission bits, e.g. 644 or 755')
    .description('Upload a file (streamed: any size within the quota)')
    .action(async (name: string, local: string, remote: string, opts: { mode?: string }) => {
      const put = (await putFile(ctx(), name, local, remote, opts.mode)) as { path: string; size: number; version: number };
      console.log(`${put.path}: ${bytes(put.size)} written to ${name} (version ${put.version})`);
    });

  volume
    .command('get')
    .argument('<name>')
    .argument('<remote>', 'a file inside the volume')
    .argument('<local>', 'where to write it')
    .description('Download a file (streamed)')
    .action(async (name: string, remote: string, local: string) => {
      const size = await getFile(ctx(), name, remote, local);
      console.log(`${local}: ${bytes(size)}`);
    });

  volume
    .command('rm')
    .argument('<name>')
    .argument('<path>', 'a file, or a directory with everything below it')
    .description('Remove files from a volume')
    .action(async (name: string, path: string) => {
      const { body } = await client().request<{ removed: number; version: number }>(
        'DELETE',
        `/api/v1/volumes/${encodeURIComponent(name)}/files?path=${encodeURIComponent(path)}`,
      );
      console.log(`${body.removed} files removed from ${name} (version ${body.version})`);
    });

  volume
    .command('delete')
    .argument('<name>')
    .description('Delete a volume and everything in it')
    .action(async (name: string) => {
      await client().request('DELETE', `/api/v1/volumes/${encodeURIComponent(name)}`);
      console.log(`volume ${name} deleted`);
    });

  return volume;
}
