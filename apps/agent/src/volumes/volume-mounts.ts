import { Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { constants, createReadStream, createWriteStream } from 'node:fs';
import { chmod, copyFile, mkdir, open, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import {
  agentVolumePath,
  type ContainerStart,
  VOLUME_CHUNK_BYTES,
  type VolumeCommitResult,
  type VolumeFileEntry,
  type VolumeManifest,
} from '#tern/contracts';
import { sha256Hex, volumePath } from '#tern/volumes';
import { callGateway, type GatewayAccess, refusalOf } from '../gateway-data.js';
import type { ChunkCache } from './chunk-cache.js';

/** Why a volume could not be mounted; the start fails with this message. */
export class VolumeMountError extends Error {
  override name = 'VolumeMountError';
}

/** One volume as a container mounts it, kept on disk so a commit survives an agent restart. */
interface MountRecord {
  name: string;
  readOnly: boolean;
  /** The host directory bound into the container. */
  dir: string;
  baseVersion: number;
  /** The files as materialized (rw mounts only: what a commit compares with). */
  base: VolumeFileEntry[];
}

/** Chunks fetched at once while materializing: at most this many chunks in memory. */
const DOWNLOADS_IN_PARALLEL = 4;
const CALL_TIMEOUT_MS = 300_000;

/**
 * The volumes of this machine's containers, materialized from the gateway. Read-only mounts
 * share one tree per volume version (`<root>/ro/<workspace>/<volume>@<version>`, built once);
 * a read-write mount gets its own copy (`<root>/rw/<container>/<volume>`), committed back when
 * the container stops (or when asked) as the files that differ from what it started with.
 * Chunks come through the ChunkCache, so what this machine holds is never downloaded again.
 */
export class VolumeMounts {
  private readonly logger = new Logger('volumes');
  private readonly building = new Map<string, Promise<string>>();

  constructor(
    private readonly root: string,
    private readonly cache: ChunkCache,
    private readonly gateway: () => GatewayAccess,
  ) {}

  /** Host directories by volume name for the start command's volumes. */
  async mount(cmd: ContainerStart): Promise<Record<string, string>> {
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
      });
    }
    if (records.length) await this.writeRecords(cmd.containerId, records);
    return dirs;
  }

  /**
   * Commits the read-write mounts of the container (all, or `only`) as their next versions,
   * each from the version it started with; a committed mount's base moves to the new version.
   */
  async commit(containerId: string, only?: string): Promise<Record<string, VolumeCommitResult | 'unchanged'>> {
    const records = await this.readRecords(containerId);
    const results: Record<string, VolumeCommitResult | 'unchanged'> = {};
    for (const record of records) {
      if (record.readOnly || (only && record.name !== only)) continue;
      const outcome = await this.commitOne(containerId, record);
      results[record.name] = outcome ?? 'unchanged';
      if (outcome?.overwritten.length)
        this.logger.warn(
          `commit of volume ${record.name} from container ${containerId} overwrote files changed by others since version ${record.baseVersion}: ${outcome.overwritten.join(', ')}`,
        );
    }
    if (records.length) await this.writeRecords(containerId, records);
    return results;
  }

  /** After the container stopped: commits its read-write mounts, then removes its copies. */
  async release(containerId: string): Promise<void> {
    const records = await this.readRecords(containerId);
    if (!records.length) return;
    await this.commit(containerId);
    await rm(join(this.root, 'rw', containerId), { recursive: true, force: true });
    await rm(this.recordFile(containerId), { force: true });
    await this.pruneSharedTrees();
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
        if (await exists(dir)) return dir;
        const tmp = `${dir}.tmp-${randomBytes(4).toString('hex')}`;
        try {
          await this.materialize(containerId, manifest, tmp);
          await rename(tmp, dir).catch(async (e: NodeJS.ErrnoException) => {
            if (!(await exists(dir))) throw e;
          });
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

  private async materialize(containerId: string, manifest: VolumeManifest, dir: string): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o755 });
    // Every chunk on this machine first, a few at a time: memory stays at a few chunks.
    const missing = [...new Set(manifest.files.flatMap((f) => f.chunks))].filter((hex) => !this.cache.has(hex));
    await inParallel(missing, DOWNLOADS_IN_PARALLEL, (hex) =>
      this.cache.ensure(hex, () => this.download(containerId, manifest.volume, hex)),
    );
    for (const file of manifest.files) {
      const checked = volumePath(file.path);
      if ('problem' in checked) throw new VolumeMountError(`volume ${manifest.volume}: ${checked.problem}`);
      const target = join(dir, ...checked.path.split('/'));
      await mkdir(dirname(target), { recursive: true, mode: 0o755 });
      await this.writeFileOf(containerId, manifest.volume, file, target);
      await chmod(target, file.mode & 0o777);
      const mtime = new Date(file.mtime);
      await utimes(target, mtime, mtime);
    }
  }

  private async writeFileOf(containerId: string, volume: string, file: VolumeFileEntry, target: string): Promise<void> {
    const chunkPath = (hex: string) => this.cache.ensure(hex, () => this.download(containerId, volume, hex));
    if (!file.chunks.length) return writeFile(target, '');
    // One chunk: a copy (a reflink where the filesystem has them).
    if (file.chunks.length === 1) return copyFile(await chunkPath(file.chunks[0]), target, constants.COPYFILE_FICLONE);
    for (const [i, hex] of file.chunks.entries()) {
      await pipeline(createReadStream(await chunkPath(hex)), createWriteStream(target, { flags: i === 0 ? 'w' : 'a' }));
    }
  }

  private async download(containerId: string, volume: string, hex: string): Promise<Uint8Array> {
    const response = await this.call(`${agentVolumePath(containerId, volume)}/chunks/${hex}`);
    if (!response.ok) throw new VolumeMountError(`volume ${volume}: the gateway refused chunk ${hex}: ${await refusalOf(response)}`);
    return new Uint8Array(await response.arrayBuffer());
  }

  // --- committing ----------------------------------------------------------------------

  /** The commit of one read-write mount; undefined when nothing changed. */
  private async commitOne(containerId: string, record: MountRecord): Promise<VolumeCommitResult | undefined> {
    const base = new Map(record.base.map((f) => [f.path, f]));
    const writes: { path: string; mode: number; mtime: string; chunks: string[] }[] = [];
    const present = new Set<string>();
    const entries = (await exists(record.dir)) ? await readdir(record.dir, { withFileTypes: true, recursive: true }) : [];
    for (const entry of entries) {
      // Regular files only: links could point anywhere on the host, directories follow from paths.
      if (!entry.isFile()) continue;
      const full = join(entry.parentPath, entry.name);
      const path = relative(record.dir, full).split(sep).join('/');
      present.add(path);
      const s = await stat(full);
      const was = base.get(path);
      const mode = s.mode & 0o777;
      if (was && was.size === s.size && Date.parse(was.mtime) === Math.round(s.mtimeMs) && was.mode === mode) continue;
      const chunks = await this.uploadChunks(containerId, record.name, full);
      writes.push({ path, mode, mtime: new Date(Math.round(s.mtimeMs)).toISOString(), chunks });
    }
    const removals = record.base.map((f) => f.path).filter((p) => !present.has(p));
    if (!writes.length && !removals.length) return undefined;
    const response = await this.call(`${agentVolumePath(containerId, record.name)}/commit`, {
      json: { baseVersion: record.baseVersion, writes, removals },
    });
    if (!response.ok) throw new Error(`commit of volume ${record.name} refused: ${await refusalOf(response)}`);
    const result = (await response.json()) as VolumeCommitResult;
    // The copy now matches the new version: a later commit starts from it.
    record.baseVersion = result.version;
    record.base = await this.snapshot(record.dir);
    return result;
  }

  /** Reads the file a chunk at a time (one buffer) and uploads each chunk; their digests in order. */
  private async uploadChunks(containerId: string, volume: string, file: string): Promise<string[]> {
    const digests: string[] = [];
    const handle = await open(file, 'r');
    try {
      const buffer = Buffer.allocUnsafe(VOLUME_CHUNK_BYTES);
      for (;;) {
        let filled = 0;
        while (filled < buffer.length) {
          const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled);
          if (!bytesRead) break;
          filled += bytesRead;
        }
        if (!filled) break;
        const chunk = buffer.subarray(0, filled);
        const hex = sha256Hex(chunk);
        const response = await this.call(`${agentVolumePath(containerId, volume)}/chunks/${hex}`, chunk);
        if (!response.ok) throw new Error(`volume ${volume}: the gateway refused chunk ${hex}: ${await refusalOf(response)}`);
        digests.push(hex);
        if (filled < buffer.length) break;
      }
    } finally {
      await handle.close();
    }
    return digests;
  }

  /** The files of a tree as a commit compares them (chunks are not needed: size, mode and mtime tell changes). */
  private async snapshot(dir: string): Promise<VolumeFileEntry[]> {
    const files: VolumeFileEntry[] = [];
    for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
      if (!entry.isFile()) continue;
      const full = join(entry.parentPath, entry.name);
      const s = await stat(full);
      const path = relative(dir, full).split(sep).join('/');
      files.push({ path, size: s.size, mode: s.mode & 0o777, mtime: new Date(Math.round(s.mtimeMs)).toISOString(), chunks: [] });
    }
    return files;
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
        if (Number(version) < newest.get(name)! && !inUse.has(dir) && !this.building.has(dir))
          await rm(dir, { recursive: true, force: true });
      }
    }
  }

  private call(path: string, send?: Uint8Array | { json: unknown }): Promise<Response> {
    return callGateway(this.gateway(), path, CALL_TIMEOUT_MS, fetch, send);
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Runs `work` over `items` with at most `limit` at once. */
async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
