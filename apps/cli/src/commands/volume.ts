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

interface CommitReport {
  volume: string;
  version: number;
  containers: {
    containerId: string;
    outcome: string;
    version?: number;
    written?: number;
    removed?: number;
    overwritten: string[];
    skipped: string[];
    reason?: string;
  }[];
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

/** One line per container, then what each overwrote or left out: the commit report. */
export function renderCommit(report: CommitReport): string {
  if (!report.containers.length)
    return `no running container mounts ${report.volume} read-write: nothing to commit (version ${report.version})`;
  const lines: string[] = [];
  for (const c of report.containers) {
    const what =
      c.outcome === 'committed'
        ? `committed version ${c.version}: ${c.written} written, ${c.removed} removed`
        : `${c.outcome}${c.reason ? `: ${c.reason}` : ''}`;
    lines.push(`${c.containerId}: ${what}`);
    if (c.overwritten.length) lines.push(`  overwrote files others changed since its base: ${c.overwritten.join(', ')}`);
    for (const s of c.skipped) lines.push(`  left out ${s}`);
  }
  return lines.join('\n');
}

/** Streams a local file into the volume (the gateway stores it chunk by chunk), read as fast as the socket drains. */
export async function putFile(ctx: CliContext, name: string, local: string, remote: string, mode?: string): Promise<unknown> {
  const { size } = await stat(local);
  const path = `${filesPath(name, remote)}${mode ? `&mode=${mode}` : ''}`;
  const response = await new ApiClient(ctx).upload('PUT', path, createReadStream(local).pipe(progress(`put ${remote}`, size)), size);
  return response.json();
}

/** Streams a file of the volume to `local` (written beside it, then renamed: no half file on failure). */
export async function getFile(ctx: CliContext, name: string, remote: string, local: string): Promise<number> {
  const response = await new ApiClient(ctx).stream('GET', filesPath(name, remote));
  if (!response.body) throw new ApiError(response.status, `${response.status} the gateway sent no bytes for ${remote}`);
  const total = Number(response.headers.get('content-length')) || undefined;
  const partial = `${local}.tern-partial`;
  await pipeline(Readable.fromWeb(response.body as never), progress(`get ${remote}`, total), createWriteStream(partial));
  await rename(partial, local);
  return (await stat(local)).size;
}

function context() {
  return resolveContext();
}

function client() {
  return new ApiClient(context());
}

export function volumeCommand(): Command {
  const volume = new Command('volume').description(
    "Volumes: the workspace's named file trees, mounted into containers by a spec's volumes:",
  );
  for (const add of [addCreate, addList, addLs, addPut, addGet, addCommit, addRm, addDelete]) add(volume);
  return volume;
}

function addCreate(volume: Command): void {
  volume
    .command('create')
    .argument('<name>', 'lower-case letters, digits or -')
    .description('Create an empty volume')
    .action(async (name: string) => {
      await client().request('POST', '/api/v1/volumes', { name });
      console.log(`volume ${name} created`);
    });
}

function addList(volume: Command): void {
  volume
    .command('list')
    .description("The workspace's volumes with their files and sizes, and its quota")
    .option('--json', 'print the raw JSON')
    .action(async (opts: { json?: boolean }) => {
      const { body } = await client().get<VolumeList>('/api/v1/volumes');
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderVolumes(body));
    });
}

function addLs(volume: Command): void {
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
}

function addPut(volume: Command): void {
  volume
    .command('put')
    .argument('<name>')
    .argument('<local>', 'a local file')
    .argument('<remote>', 'its path inside the volume')
    .option('--mode <octal>', 'permission bits, e.g. 644 or 755')
    .description('Upload a file (streamed: any size within the quota)')
    .action(async (name: string, local: string, remote: string, opts: { mode?: string }) => {
      const put = (await putFile(context(), name, local, remote, opts.mode)) as { path: string; size: number; version: number };
      console.log(`${put.path}: ${bytes(put.size)} written to ${name} (version ${put.version})`);
    });
}

function addGet(volume: Command): void {
  volume
    .command('get')
    .argument('<name>')
    .argument('<remote>', 'a file inside the volume')
    .argument('<local>', 'where to write it')
    .description('Download a file (streamed)')
    .action(async (name: string, remote: string, local: string) => {
      const size = await getFile(context(), name, remote, local);
      console.log(`${local}: ${bytes(size)}`);
    });
}

function addCommit(volume: Command): void {
  volume
    .command('commit')
    .argument('<name>')
    .option('--json', 'print the raw JSON')
    .description("Commit now what the workspace's running containers wrote to the volume (they also commit when they stop)")
    .action(async (name: string, opts: { json?: boolean }) => {
      const { body } = await client().request<CommitReport>('POST', `/api/v1/volumes/${encodeURIComponent(name)}/commit`);
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderCommit(body));
    });
}

function addRm(volume: Command): void {
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
}

function addDelete(volume: Command): void {
  volume
    .command('delete')
    .argument('<name>')
    .description('Delete a volume and everything in it')
    .action(async (name: string) => {
      await client().request('DELETE', `/api/v1/volumes/${encodeURIComponent(name)}`);
      console.log(`volume ${name} deleted`);
    });
}
