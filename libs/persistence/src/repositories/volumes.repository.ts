import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TransactionalRepository } from './transactional.repository.js';

/** A volume with what it holds. */
export interface VolumeSummary {
  id: string;
  name: string;
  version: number;
  files: number;
  /** Sum of its files' sizes. */
  bytes: number;
  createdAt: Date;
  updatedAt: Date;
}

/** One manifest entry as stored. */
export interface VolumeFileRow {
  path: string;
  size: number;
  mode: number;
  mtime: Date;
  chunks: string[];
  version: number;
}

export interface VolumeFileWrite {
  path: string;
  size: number;
  mode: number;
  mtime: Date;
  chunks: string[];
}

export interface VolumeCommitOutcome {
  version: number;
  written: number;
  removed: number;
  overwritten: string[];
}

/** A volume mounted by a container placed on a machine. */
export interface PlacedVolume {
  volumeId: string;
  workspaceId: string;
  readOnly: boolean;
}

/** A container that mounts a volume read-write, and the machine it is placed on. */
export interface VolumeWriter {
  containerId: string;
  machineId: string;
}

/** Container states in which a machine may still read (and, for rw mounts, commit) its volumes. */
const MOUNTING_STATES = `('pending', 'scheduled', 'starting', 'running', 'stopping')`;

/**
 * How long after a sandbox was terminated its machine may still commit its read-write volumes:
 * the agent commits while it removes the sandbox, which the gateway asks after the row ended.
 */
const SANDBOX_COMMIT_GRACE = `interval '5 minutes'`;

const SUMMARY = `SELECT v.id, v.name, v.version, v.created_at AS "createdAt", v.updated_at AS "updatedAt",
    count(f.path)::int AS files, coalesce(sum(f.size), 0)::float8 AS bytes
  FROM volumes v LEFT JOIN volume_files f ON f.volume_id = v.id`;

/** Volumes, their manifests and the chunks their workspace stores. */
@Injectable()
export class VolumesRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  /** The new volume, or undefined when the workspace has one of that name. */
  async create(workspaceId: string, name: string): Promise<VolumeSummary | undefined> {
    const [row] = await this.rows<{ id: string }>(
      `INSERT INTO volumes (workspace_id, name) VALUES ($1, $2) ON CONFLICT ON CONSTRAINT uq_volumes_workspace_name DO NOTHING RETURNING id`,
      [workspaceId, name],
    );
    return row ? this.find(workspaceId, name) : undefined;
  }

  list(workspaceId: string): Promise<VolumeSummary[]> {
    return this.rows<VolumeSummary>(`${SUMMARY} WHERE v.workspace_id = $1 GROUP BY v.id ORDER BY v.name`, [workspaceId]);
  }

  async find(workspaceId: string, name: string): Promise<VolumeSummary | undefined> {
    const [row] = await this.rows<VolumeSummary>(`${SUMMARY} WHERE v.workspace_id = $1 AND v.name = $2 GROUP BY v.id`, [workspaceId, name]);
    return row;
  }

  async remove(volumeId: string): Promise<void> {
    await this.rows(`DELETE FROM volumes WHERE id = $1`, [volumeId]);
  }

  /** The files at `prefix` or below it (all of them for ''), by path. */
  files(volumeId: string, prefix = ''): Promise<VolumeFileRow[]> {
    return this.rows<VolumeFileRow>(
      `SELECT path, size::float8 AS size, mode, mtime, chunks, version FROM volume_files
        WHERE volume_id = $1 AND ($2 = '' OR path = $2 OR starts_with(path, $2 || '/')) ORDER BY path`,
      [volumeId, prefix],
    );
  }

  /** The volume's version and its files as of that version (one statement, one snapshot). */
  async manifest(volumeId: string): Promise<{ version: number; files: VolumeFileRow[] }> {
    const [row] = await this.rows<{ version: number; files: VolumeFileRow[] }>(
      `SELECT v.version, coalesce(json_agg(json_build_object('path', f.path, 'size', f.size, 'mode', f.mode, 'mtime', f.mtime,
                'chunks', f.chunks, 'version', f.version) ORDER BY f.path) FILTER (WHERE f.path IS NOT NULL), '[]') AS files
         FROM volumes v LEFT JOIN volume_files f ON f.volume_id = v.id WHERE v.id = $1 GROUP BY v.id`,
      [volumeId],
    );
    return row;
  }

  /** The sizes of the given chunks the workspace stores (those it does not are left out). */
  async chunkSizes(workspaceId: string, digests: string[]): Promise<Map<string, number>> {
    const rows = await this.rows<{ digest: string; size: number }>(
      `SELECT digest, size FROM volume_chunks WHERE workspace_id = $1 AND digest = ANY($2::text[])`,
      [workspaceId, [...new Set(digests)]],
    );
    return new Map(rows.map((r) => [r.digest, r.size]));
  }

  /** Bytes stored for the workspace (each chunk once) and the files of all its volumes. */
  async usage(workspaceId: string): Promise<{ bytes: number; files: number }> {
    const [row] = await this.rows<{ bytes: number; files: number }>(
      `SELECT (SELECT coalesce(sum(size), 0)::float8 FROM volume_chunks WHERE workspace_id = $1) AS bytes,
              (SELECT count(*)::int FROM volume_files f JOIN volumes v ON v.id = f.volume_id WHERE v.workspace_id = $1) AS files`,
      [workspaceId],
    );
    return row;
  }

  /** Whether the workspace stores the chunk; a stored one is touched, so the sweeper leaves it a while. */
  async touchChunk(workspaceId: string, digest: string): Promise<boolean> {
    const rows = await this.rows(`UPDATE volume_chunks SET touched_at = now() WHERE workspace_id = $1 AND digest = $2 RETURNING digest`, [
      workspaceId,
      digest,
    ]);
    return rows.length > 0;
  }

  /** The chunk is stored for the workspace (once stored in the object store). */
  async recordChunk(workspaceId: string, digest: string, size: number): Promise<void> {
    await this.rows(
      `INSERT INTO volume_chunks (workspace_id, digest, size) VALUES ($1, $2, $3)
       ON CONFLICT ON CONSTRAINT pk_volume_chunks DO UPDATE SET touched_at = now()`,
      [workspaceId, digest, size],
    );
  }

  /**
   * Applies writes and removals as the volume's next version, last commit winning per file; the
   * paths among them that a version after `baseVersion` had written are reported as overwritten.
   */
  commit(volumeId: string, baseVersion: number | undefined, writes: VolumeFileWrite[], removals: string[]): Promise<VolumeCommitOutcome> {
    return this.transaction(async (tx) => {
      const [locked] = await tx.rows<{ version: number }>(`SELECT version FROM volumes WHERE id = $1 FOR UPDATE`, [volumeId]);
      const version = locked.version + 1;
      const paths = [...writes.map((w) => w.path), ...removals];
      const overwritten =
        baseVersion === undefined
          ? []
          : (
              await tx.rows<{ path: string }>(
                `SELECT path FROM volume_files WHERE volume_id = $1 AND path = ANY($2::text[]) AND version > $3 ORDER BY path`,
                [volumeId, paths, baseVersion],
              )
            ).map((r) => r.path);
      for (const w of writes) {
        await tx.rows(
          `INSERT INTO volume_files (volume_id, path, size, mode, mtime, chunks, version) VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT ON CONSTRAINT pk_volume_files DO UPDATE
             SET size = EXCLUDED.size, mode = EXCLUDED.mode, mtime = EXCLUDED.mtime, chunks = EXCLUDED.chunks, version = EXCLUDED.version`,
          [volumeId, w.path, w.size, w.mode, w.mtime, w.chunks, version],
        );
      }
      const removed = removals.length
        ? (await tx.rows(`DELETE FROM volume_files WHERE volume_id = $1 AND path = ANY($2::text[]) RETURNING path`, [volumeId, removals]))
            .length
        : 0;
      await tx.rows(`UPDATE volumes SET version = $2, updated_at = now() WHERE id = $1`, [volumeId, version]);
      return { version, written: writes.length, removed, overwritten };
    });
  }

  /**
   * Chunks of the workspace no file holds any more and untouched for `idleSeconds` (an upload in
   * progress touches what it stores or reuses), forgotten here; the caller deletes their objects.
   * `only` narrows it to those digests (what a refused upload stored).
   */
  async forgetUnheldChunks(workspaceId: string, idleSeconds: number, only?: string[]): Promise<string[]> {
    const rows = await this.rows<{ digest: string }>(
      `DELETE FROM volume_chunks c WHERE c.workspace_id = $1 AND c.touched_at <= now() - make_interval(secs => $2)
         AND ($3::text[] IS NULL OR c.digest = ANY($3::text[]))
         AND NOT EXISTS (SELECT 1 FROM volume_files f JOIN volumes v ON v.id = f.volume_id
                          WHERE v.workspace_id = $1 AND c.digest = ANY(f.chunks))
       RETURNING c.digest`,
      [workspaceId, idleSeconds, only ?? null],
    );
    return rows.map((r) => r.digest);
  }

  /**
   * The volume `name` as mounted by container `containerId` when that container is placed on
   * `machineId` (and not stopped) and its version's spec mounts it, or by sandbox `containerId`
   * placed there (running, or terminated within SANDBOX_COMMIT_GRACE) whose spec mounts it;
   * undefined otherwise.
   */
  async placedVolume(machineId: string, containerId: string, name: string): Promise<PlacedVolume | undefined> {
    const [row] = await this.rows<PlacedVolume>(
      `SELECT v.id AS "volumeId", v.workspace_id AS "workspaceId", coalesce((m->>'readOnly')::boolean, false) AS "readOnly"
         FROM containers c
         JOIN deployment_versions dv ON dv.id = c.deployment_version_id
         JOIN deployments d ON d.id = dv.deployment_id
         CROSS JOIN LATERAL jsonb_array_elements(coalesce(dv.spec->'volumes', '[]'::jsonb)) m
         JOIN volumes v ON v.workspace_id = d.workspace_id AND v.name = m->>'name'
        WHERE c.id = $2 AND c.machine_id = $1 AND c.state IN ${MOUNTING_STATES} AND m->>'name' = $3
       UNION ALL
       SELECT v.id, v.workspace_id, coalesce((m->>'readOnly')::boolean, false)
         FROM sandboxes s
         CROSS JOIN LATERAL jsonb_array_elements(coalesce(s.spec->'volumes', '[]'::jsonb)) m
         JOIN volumes v ON v.workspace_id = s.workspace_id AND v.name = m->>'name'
        WHERE s.id = $2 AND s.machine_id = $1 AND m->>'name' = $3
          AND (s.state IN ('placing', 'running') OR (s.state = 'terminated' AND s.ended_at > now() - ${SANDBOX_COMMIT_GRACE}))
        LIMIT 1`,
      [machineId, containerId, name],
    );
    return row;
  }

  /**
   * The containers (not stopped) whose version's spec mounts the volume read-write, and the
   * running sandboxes whose spec does, with their machines (a sandbox's id stands as its container's).
   */
  writers(volumeId: string): Promise<VolumeWriter[]> {
    return this.rows<VolumeWriter>(
      `SELECT c.id AS "containerId", c.machine_id AS "machineId"
         FROM containers c
         JOIN deployment_versions dv ON dv.id = c.deployment_version_id
         JOIN deployments d ON d.id = dv.deployment_id
         CROSS JOIN LATERAL jsonb_array_elements(coalesce(dv.spec->'volumes', '[]'::jsonb)) m
         JOIN volumes v ON v.workspace_id = d.workspace_id AND v.name = m->>'name'
        WHERE v.id = $1 AND c.machine_id IS NOT NULL AND c.state IN ${MOUNTING_STATES}
          AND NOT coalesce((m->>'readOnly')::boolean, false)
       UNION ALL
       SELECT s.id, s.machine_id
         FROM sandboxes s
         CROSS JOIN LATERAL jsonb_array_elements(coalesce(s.spec->'volumes', '[]'::jsonb)) m
         JOIN volumes v ON v.workspace_id = s.workspace_id AND v.name = m->>'name'
        WHERE v.id = $1 AND s.machine_id IS NOT NULL AND s.state = 'running'
          AND NOT coalesce((m->>'readOnly')::boolean, false)
        ORDER BY 1`,
      [volumeId],
    );
  }

  /** Whether a file of the volume holds the chunk. */
  async holdsChunk(volumeId: string, digest: string): Promise<boolean> {
    const rows = await this.rows(`SELECT 1 FROM volume_files WHERE volume_id = $1 AND $2 = ANY(chunks) LIMIT 1`, [volumeId, digest]);
    return rows.length > 0;
  }
}
