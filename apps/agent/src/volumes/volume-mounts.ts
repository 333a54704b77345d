import { Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, mkdir, open, readdir, readFile, readlink, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import {
  agentVolumePath,
  type ContainerStart,
  VOLUME_CHUNK_BYTES,
  type VolumeCommitAnswer,
  type VolumeCommitResult,
  type VolumeFileEntry,
  type VolumeManifest,
} from '#tern/contracts';
import { callGateway, type GatewayAccess, refusalOf } from '../gateway-data.js';
import type { ChunkCache } from './chunk-cache.js';
import { type ChunkSource, gatewayChunks, registryChunks, VolumeMountError } from './chunk-sources.js';
import { holdTree, writeTree } from './volume-trees.js';

export { VolumeMountError } from './chunk-sources.js';

/** One volume as a container mounts it, kept on disk so a commit survives an agent restart. */
interface MountRecord {
  name: string;
  readOnly: boolean;
  /** The host directory bound into the container. */
  dir: string;
  baseVersion: number;
  /** The files as materialized (rw mounts only: what a commit compares with). */
  base: VolumeFileEntry[];
  /** Where its chunks live (the manifest's word); absent: the gateway. */
  store?: VolumeManifest['store'];
}

const CALL_TIMEOUT_MS = 300_000;

/**
 * The volumes of this machine's containers, materialized from the gateway. Read-only mounts
 * share one tree per volume version (`<root>/ro/<workspace>/<volume>@<version>`, built once);
 * a read-write mount gets its own copy (`<root>/rw/<container>/<volume>`), committed back when
 * the container stops (or when asked) as the files that differ from what it started with.
 * Chunks come through the ChunkCache, so what this machine holds is never downloaded again; a
 * read-only tree's chunks are written once, into the tree, which the cache then reads them from.
 */
export class VolumeMounts {
  private readonly logger = new Logger('volumes');
  private readonly building = new Map<string, Promise<string>>();
  /** The commit under way per container, which the next one waits for. */
  private readonly committing = new Map<string, Promise<unknown>>();

  constructor(
    private readonly root: string,
    private readonly cache: ChunkCache,
    private readonly gateway: () => GatewayAccess,
    /** The site cache chunks are read through (AGENT_SITE_CACHE), if the machine has one. */
    private readonly siteCache?: string,
  ) {}

  /** Host directories by volume name for the start command's volumes. */
  async mount(cmd: Pick<ContainerStart, 'containerId' | 'workspaceId' | 'volumes'>): Promise<Record<string, string>> {
    const dirs: Record<string, string> = {};
    const records: MountRecord[] = [];
    for (const v of cmd.volumes) {
      const manifest = await this.manifest(cmd.containerId, v.volume);
      const dir = v.readOnly
        ? await this.sharedTree(cmd.containerId, cmd.workspaceId, manifest)
        : await this.ownCopy(cmd.containerId, manifest);
      dirs[v.volume] = dir;
      records.push({
        name: v.volume,
        readOnly: v.readOnly,
        dir,
        baseVersion: manifest.version,
        base: v.readOnly ? [] : [...manifest.files],
        ...(manifest.store ? { store: manifest.store } : {}),
      });
    }
    if (records.length) await this.writeRecords(cmd.containerId, records);
    return dirs;
  }

  /**
   * Commits the read-write mounts of the container (all, or `only`) as their next versions,
   * each from the version it started with; a committed mount's base moves to the new version.
   */
  async commit(containerId: string, only?: string): Promise<Record<string, VolumeCommitAnswer>> {
    // One commit of a container at a time (its socket, the API and its stop may ask at once):
    // each starts from the base the one before it left, so none reports the other's files as overwritten.
    const commitNow = () => this.commitNow(containerId, only);
    const next = (this.committing.get(containerId) ?? Promise.resolve()).then(commitNow, commitNow);
    const forget = () => {
      if (this.committing.get(containerId) === settled) this.committing.delete(containerId);
    };
    const settled = next.then(forget, forget);
    this.committing.set(containerId, settled);
    return next;
  }

  private async commitNow(containerId: string, only?: string): Promise<Record<string, VolumeCommitAnswer>> {
    const records = await this.readRecords(containerId);
    const results: Record<string, VolumeCommitAnswer> = {};
    for (const record of records) {
      if (record.readOnly || (only && record.name !== only)) continue;
      const answer = await this.commitOne(containerId, record);
      results[record.name] = answer;
      if (answer.overwritten.length)
        this.logger.warn(
          `commit of volume ${record.name} from container ${containerId} overwrote files changed by others since version ${record.baseVersion}: ${answer.overwritten.join(', ')}`,
        );
    }
    if (records.length) await this.writeRecords(containerId, records);
    return results;
  }

  /** The commit a NATS request asks for (POST /api/v1/volumes/<name>/commit): its report, or why there is none. */
  async commitAsked(containerId: string, volume: string): Promise<VolumeCommitAnswer> {
    try {
      const answer = (await this.commit(containerId, volume))[volume];
      return (
        answer ?? {
          outcome: 'not-mounted',
          overwritten: [],
          skipped: [],
          reason: `container ${containerId} has no read-write copy of ${volume} here`,
        }
      );
    } catch (e) {
      return { outcome: 'failed', overwritten: [], skipped: [], reason: (e as Error).message };
    }
  }

  /** After the container stopped: commits its read-write mounts, then removes its copies; the commit reports by volume. */
  async release(containerId: string): Promise<Record<string, VolumeCommitAnswer>> {
    const records = await this.readRecords(containerId);
    if (!records.length) return {};
    const reports = await this.commit(containerId);
    await rm(join(this.root, 'rw', containerId), { recursive: true, force: true });
    await rm(this.recordFile(containerId), { force: true });
    await this.pruneSharedTrees();
    return reports;
  }

  // --- materializing -------------------------------------------------------------------

  private async manifest(containerId: string, volume: string): Promise<VolumeManifest> {
    const response = await this.call(`${agentVolumePath(containerId, volume)}/manifest`);
    if (!response.ok) throw new VolumeMountError(`volume ${volume}: the gateway refused its manifest: ${await refusalOf(response)}`);
    return (await response.json()) as VolumeManifest;
  }

  /** The read-only tree of a volume version, built once and shared by the containers mounting it. */
  private sharedTree(containerId: string, workspaceId: string, manifest: VolumeManifest): Promise<string> {
    const dir = join(this.root, 'ro', workspaceId, `${manifest.volume}@${manifest.version}`);
    let p = this.building.get(dir);
    if (!p) {
      p = (async () => {
        if (await exists(dir)) {
          // Built before this agent started: the cache learns its chunks again.
          holdTree(manifest, dir, this.cache);
          return dir;
        }
        const tmp = `${dir}.tmp-${randomBytes(4).toString('hex')}`;
        try {
          await this.materialize(containerId, manifest, tmp, true);
          await rename(tmp, dir).catch(async (e: NodeJS.ErrnoException) => {
            if (!(await exists(dir))) throw e;
          });
          holdTree(manifest, dir, this.cache);
          return dir;
        } finally {
          await rm(tmp, { recursive: true, force: true });
        }
      })().finally(() => this.building.delete(dir));
      this.building.set(dir, p);
    }
    return p;
  }

  private async ownCopy(containerId: string, manifest: VolumeManifest): Promise<string> {
    const dir = join(this.root, 'rw', containerId, manifest.volume);
    await rm(dir, { recursive: true, force: true });
    await this.materialize(containerId, manifest, dir);
    return dir;
  }

  private source(containerId: string, volume: string, store: VolumeManifest['store']): ChunkSource {
    if (store !== 'registry') return gatewayChunks(this.gateway, containerId, volume);
    const siteCache = this.siteCache ? { url: this.siteCache, unreachable: (message: string) => this.logger.warn(message) } : undefined;
    return registryChunks(this.gateway, containerId, volume, siteCache);
  }

  private async materialize(containerId: string, manifest: VolumeManifest, dir: string, readOnly = false): Promise<void> {
    await writeTree(manifest, dir, this.cache, this.source(containerId, manifest.volume, manifest.store), readOnly);
  }

  // --- committing ----------------------------------------------------------------------

  /** The commit of one read-write mount and its report. */
  private async commitOne(containerId: string, record: MountRecord): Promise<VolumeCommitAnswer> {
    const source = this.source(containerId, record.name, record.store);
    const base = new Map(record.base.map((f) => [f.path, f]));
    const writes: { path: string; mode: number; mtime: string; chunks: string[] }[] = [];
    const { files, skipped } = await walkCopy(record.dir);
    const seen: VolumeFileEntry[] = [];
    for (const path of files) {
      const read = await this.readFileOfCopy(source, record, path, base.get(path));
      if ('skipped' in read) skipped.push(read.skipped);
      else {
        seen.push(read.entry);
        if (read.chunks) writes.push({ path, mode: read.entry.mode, mtime: read.entry.mtime, chunks: read.chunks });
      }
    }
    const present = new Set(seen.map((f) => f.path));
    const removals = record.base.map((f) => f.path).filter((p) => !present.has(p));
    if (!writes.length && !removals.length) return { outcome: 'unchanged', overwritten: [], skipped };
    const response = await this.call(`${agentVolumePath(containerId, record.name)}/commit`, {
      json: { baseVersion: record.baseVersion, writes, removals },
    });
    if (!response.ok) throw new Error(`commit of volume ${record.name} refused: ${await refusalOf(response)}`);
    const result = (await response.json()) as VolumeCommitResult;
    // The copy now matches the new version (as read): a later commit starts from it.
    record.baseVersion = result.version;
    record.base = seen;
    return { outcome: 'committed', ...result, overwritten: [...result.overwritten], skipped };
  }

  /**
   * One regular file of a read-write copy as the commit sees it, its chunks uploaded when it
   * differs from `was`. Opened without following a link and checked to lie inside the copy: the
   * container may swap a file or a directory for a link to the host's files while a commit runs.
   */
  private async readFileOfCopy(
    source: ChunkSource,
    record: MountRecord,
    path: string,
    was: VolumeFileEntry | undefined,
  ): Promise<{ entry: VolumeFileEntry; chunks?: string[] } | { skipped: string }> {
    const handle = await open(join(record.dir, ...path.split('/')), constants.O_RDONLY | constants.O_NOFOLLOW).catch(() => undefined);
    if (!handle) return { skipped: `${path}: changed into a link or removed while committing` };
    try {
      const [s, where, root] = await Promise.all([handle.stat(), readlink(`/proc/self/fd/${handle.fd}`), realpath(record.dir)]);
      if (!s.isFile() || !where.startsWith(`${root}/`)) return { skipped: `${path}: changed into a link while committing` };
      const entry = { path, size: s.size, mode: s.mode & 0o777, mtime: new Date(Math.round(s.mtimeMs)).toISOString(), chunks: [] };
      if (was && was.size === entry.size && Date.parse(was.mtime) === Date.parse(entry.mtime) && was.mode === entry.mode) return { entry };
      return { entry, chunks: await uploadChunks(source, handle) };
    } finally {
      await handle.close();
    }
  }

  // --- records -------------------------------------------------------------------------

  private recordFile(containerId: string): string {
    return join(this.root, 'records', `${containerId}.json`);
  }

  private async writeRecords(containerId: string, records: MountRecord[]): Promise<void> {
    await mkdir(join(this.root, 'records'), { recursive: true, mode: 0o700 });
    const tmp = `${this.recordFile(containerId)}.tmp`;
    await writeFile(tmp, JSON.stringify(records));
    await rename(tmp, this.recordFile(containerId));
  }

  private async readRecords(containerId: string): Promise<MountRecord[]> {
    const text = await readFile(this.recordFile(containerId), 'utf8').catch(() => undefined);
    return text ? (JSON.parse(text) as MountRecord[]) : [];
  }

  /** Removes read-only trees of older versions that no container's record names any more. */
  private async pruneSharedTrees(): Promise<void> {
    const inUse = new Set<string>();
    for (const name of await readdir(join(this.root, 'records')).catch(() => [])) {
      if (!name.endsWith('.json')) continue;
      for (const r of await this.readRecords(name.slice(0, -'.json'.length))) inUse.add(r.dir);
    }
    const ro = join(this.root, 'ro');
    for (const workspace of await readdir(ro).catch(() => [])) {
      const trees = (await readdir(join(ro, workspace))).filter((t) => /^[a-z0-9-]+@\d+$/.test(t));
      // The newest version of each volume stays: the next container mounting it starts at once.
      const newest = new Map<string, number>();
      for (const t of trees) {
        const [name, version] = t.split('@');
        newest.set(name, Math.max(newest.get(name) ?? -1, Number(version)));
      }
      for (const t of trees) {
        const [name, version] = t.split('@');
        const dir = join(ro, workspace, t);
        if (Number(version) < newest.get(name)! && !inUse.has(dir) && !this.building.has(dir)) {
          this.cache.forgetTree(dir);
          await rm(dir, { recursive: true, force: true });
        }
      }
    }
  }

  private call(path: string, send?: Uint8Array | { json: unknown }): Promise<Response> {
    return callGateway(this.gateway(), path, CALL_TIMEOUT_MS, fetch, send);
  }
}

/**
 * Reads the file a chunk at a time and uploads the chunks, `source.uploads` at once (each read
 * into a buffer of its own, reused once its upload is done: memory holds that many chunks at
 * most); their digests in order.
 */
export async function uploadChunks(source: ChunkSource, handle: FileHandle): Promise<string[]> {
  const digests: string[] = [];
  const free = Array.from({ length: source.uploads }, () => Buffer.allocUnsafe(VOLUME_CHUNK_BYTES));
  const sent = new Set<string>();
  const uploading = new Set<Promise<void>>();
  let failure: unknown;
  for (let position = 0; ;) {
    while (!free.length) await Promise.race(uploading);
    if (failure) throw failure;
    const buffer = free.pop()!;
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, position + filled);
      if (!bytesRead) break;
      filled += bytesRead;
    }
    if (!filled) break;
    position += filled;
    const chunk = buffer.subarray(0, filled);
    // On libuv's threads: the event loop keeps reading and sending while the chunk is hashed.
    const hex = Buffer.from(await crypto.subtle.digest('SHA-256', chunk)).toString('hex');
    digests.push(hex);
    // A chunk repeated in the file (zeros, say) goes once.
    if (sent.has(hex)) {
      free.push(buffer);
      if (filled < buffer.length) break;
      continue;
    }
    sent.add(hex);
    const upload: Promise<void> = source
      .upload(hex, chunk)
      .catch((e: unknown) => void (failure ??= e))
      .finally(() => {
        uploading.delete(upload);
        free.push(buffer);
      });
    uploading.add(upload);
    if (filled < buffer.length) break;
  }
  await Promise.all(uploading);
  if (failure) throw failure;
  return digests;
}

/**
 * The regular files of a read-write copy (volume paths) and what a volume does not keep, with
 * why: links could point anywhere (on the host too), and a manifest holds files, so an empty
 * directory is not kept.
 */
export async function walkCopy(dir: string): Promise<{ files: string[]; skipped: string[] }> {
  const files: string[] = [];
  const skipped: string[] = [];
  const directories: string[] = [];
  const entries = (await exists(dir)) ? await readdir(dir, { withFileTypes: true, recursive: true }) : [];
  for (const entry of entries) {
    const path = relative(dir, join(entry.parentPath, entry.name)).split(sep).join('/');
    if (entry.isFile()) files.push(path);
    else if (entry.isDirectory()) directories.push(path);
    else if (entry.isSymbolicLink()) skipped.push(`${path}: a symbolic link (volumes keep regular files only; copy the file instead)`);
    else skipped.push(`${path}: not a regular file (volumes keep regular files only)`);
  }
  for (const d of directories) {
    if (!files.some((f) => f.startsWith(`${d}/`)) && !directories.some((o) => o.startsWith(`${d}/`)))
      skipped.push(`${d}/: an empty directory (volumes keep files: put one in it to keep it)`);
  }
  return { files: files.sort(), skipped: skipped.sort() };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
