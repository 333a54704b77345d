import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { MAP_CHUNK_KEY, type TaskState } from '#tern/contracts';
import { FINAL_TASK_STATES } from '#tern/tasks';
import { type CancelledTask, UNSENT_COLUMNS, type UnsentTask } from './tasks.repository.js';
import { TransactionalRepository } from './transactional.repository.js';

export const MAP_STATES = ['accepting', 'running', 'complete', 'failed', 'cancelled'] as const;
export type MapState = (typeof MAP_STATES)[number];
export type MapOrder = 'input' | 'completion';

/** What one input came to, as /results shows it (its index beside). */
export type InputOutcome = { status: 'ok'; result: unknown } | { status: 'error' | 'cancelled'; error: string };

export interface NewMap {
  id: string;
  workspaceId: string;
  deploymentId: string;
  version: number;
  chunkSize: number;
  returnExceptions: boolean;
  order: MapOrder;
  maxRetries: number;
  timeoutSeconds: number;
}

export interface MapRow extends NewMap {
  deploymentName: string;
  state: MapState;
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  error: string | null;
  createdAt: Date;
  acceptedAt: Date | null;
  endedAt: Date | null;
}

/** A chunk staged while the body streams in. */
export interface StagedChunk {
  chunk: number;
  firstIndex: number;
  inputs: unknown[];
}

/** A chunk whose task ended but whose outcomes are not yet copied beside it. */
export interface EndedChunk {
  mapId: string;
  chunk: number;
  firstIndex: number;
  size: number;
  taskId: string;
  taskState: TaskState;
  result: unknown;
  resultRef: string | null;
  error: string | null;
  returnExceptions: boolean;
  workspaceId: string;
}

export interface SettledChunk {
  chunk: number;
  firstIndex: number;
  size: number;
  outcomes: InputOutcome[] | null;
  settledSeq: number | null;
}

export { MAP_CHUNK_KEY };

const FINAL = `(${FINAL_TASK_STATES.map((s) => `'${s}'`).join(', ')})`;
const MAP_COLUMNS = `m.id, m.workspace_id AS "workspaceId", m.deployment_id AS "deploymentId", d.name AS "deploymentName", m.deployment_version AS version,
  m.state, m.total, m.chunk_size AS "chunkSize", m.return_exceptions AS "returnExceptions", m.result_order AS "order", m.max_retries AS "maxRetries",
  m.timeout_seconds AS "timeoutSeconds", m.succeeded, m.failed, m.cancelled, m.error, m.created_at AS "createdAt", m.accepted_at AS "acceptedAt", m.ended_at AS "endedAt"`;
const ENDED_COLUMNS = `c.map_id AS "mapId", c.chunk, c.first_index AS "firstIndex", c.size, c.task_id AS "taskId", t.state AS "taskState",
  t.result, t.result_ref AS "resultRef", t.error, m.return_exceptions AS "returnExceptions", m.workspace_id AS "workspaceId"`;

/**
 * Maps and their chunks. A chunk is a task of the map's function (the task state machine is
 * TasksRepository's); what is the map's own: staging inputs, turning chunks into tasks once all
 * are in, settling a chunk once (its outcomes and the map's counts in one statement), and
 * reading outcomes back in input or completion order.
 */
@Injectable()
export class MapsRepository extends TransactionalRepository {
  // Declared so Nest sees the DataSource to inject (the base class's parameter types are not emitted here).
  constructor(db: DataSource) {
    super(db);
  }

  async create(map: NewMap): Promise<void> {
    await this.rows(
      `INSERT INTO maps (id, workspace_id, deployment_id, deployment_version, state, chunk_size, return_exceptions, result_order, max_retries, timeout_seconds)
       VALUES ($1, $2, $3, $4, 'accepting', $5, $6, $7, $8, $9)`,
      [
        map.id,
        map.workspaceId,
        map.deploymentId,
        map.version,
        map.chunkSize,
        map.returnExceptions,
        map.order,
        map.maxRetries,
        map.timeoutSeconds,
      ],
    );
  }

  /** Stages chunks of a map still accepting (each gets its task's id now; the task itself comes with accept()). */
  async stage(mapId: string, chunks: StagedChunk[]): Promise<void> {
    const records = chunks.map((c) => ({ chunk: c.chunk, first_index: c.firstIndex, size: c.inputs.length, inputs: c.inputs }));
    await this.rows(
      `INSERT INTO map_chunks (map_id, chunk, first_index, size, task_id, inputs)
       SELECT $1, x.chunk, x.first_index, x.size, gen_random_uuid(), x.inputs
       FROM jsonb_to_recordset($2::jsonb) AS x(chunk integer, first_index integer, size integer, inputs jsonb)`,
      [mapId, JSON.stringify(records)],
    );
  }

  /**
   * Every input is in: a PENDING task per chunk (its payload the chunk's inputs and its map's id
   * under MAP_CHUNK_KEY), the staging cleared, the map running. One transaction: a map is either
   * still accepting (and runs nothing) or wholly accepted.
   */
  async accept(mapId: string, total: number): Promise<boolean> {
    return this.transaction(async (tx) => {
      const claimed = await tx.rows(
        `UPDATE maps SET state = 'running', total = $2, accepted_at = now() WHERE id = $1 AND state = 'accepting' RETURNING id`,
        [mapId, total],
      );
      if (!claimed.length) return false;
      await tx.rows(
        `INSERT INTO tasks (id, workspace_id, deployment_id, deployment_version, state, payload, max_retries, timeout_seconds)
         SELECT c.task_id, m.workspace_id, m.deployment_id, m.deployment_version, 'PENDING',
                jsonb_build_object('${MAP_CHUNK_KEY}', jsonb_build_object('inputs', c.inputs, 'return_exceptions', m.return_exceptions, 'map_id', m.id)),
                m.max_retries, m.timeout_seconds
         FROM map_chunks c JOIN maps m ON m.id = c.map_id WHERE c.map_id = $1 ORDER BY c.chunk`,
        [mapId],
      );
      await tx.rows(`UPDATE map_chunks SET inputs = NULL WHERE map_id = $1`, [mapId]);
      return true;
    });
  }

  /** A map whose body never finished arriving: gone with its staged chunks (it ran nothing). */
  async discard(mapId: string): Promise<void> {
    await this.rows(`DELETE FROM maps WHERE id = $1 AND state = 'accepting'`, [mapId]);
  }

  /** The map's tasks not yet on TASKS after chunk `afterChunk`, in chunk order (so results in input order start early). */
  unsentTasks(mapId: string, afterChunk: number, limit: number): Promise<(UnsentTask & { chunk: number })[]> {
    return this.rows<UnsentTask & { chunk: number }>(
      `SELECT t.*, c.chunk FROM map_chunks c
       JOIN LATERAL (SELECT ${UNSENT_COLUMNS} FROM tasks WHERE id = c.task_id AND enqueued_at IS NULL AND state = 'PENDING') t ON true
       WHERE c.map_id = $1 AND c.chunk > $2 ORDER BY c.chunk LIMIT $3`,
      [mapId, afterChunk, limit],
    );
  }

  async findInWorkspace(mapId: string, workspaceId: string): Promise<MapRow | undefined> {
    const rows = await this.rows<MapRow>(
      `SELECT ${MAP_COLUMNS} FROM maps m JOIN deployments d ON d.id = m.deployment_id WHERE m.id = $1 AND m.workspace_id = $2`,
      [mapId, workspaceId],
    );
    return rows[0];
  }

  /** Inputs per state of their chunk's task, and when the first chunk started. */
  async progress(mapId: string): Promise<{ byTaskState: Partial<Record<TaskState, number>>; startedAt: Date | null }> {
    const rows = await this.rows<{ state: TaskState; inputs: string; startedAt: Date | null }>(
      `SELECT t.state, sum(c.size) AS inputs, min(t.started_at) AS "startedAt"
       FROM map_chunks c JOIN tasks t ON t.id = c.task_id WHERE c.map_id = $1 GROUP BY t.state`,
      [mapId],
    );
    const byTaskState: Partial<Record<TaskState, number>> = {};
    let startedAt: Date | null = null;
    for (const r of rows) {
      byTaskState[r.state] = Number(r.inputs);
      if (r.startedAt && (!startedAt || r.startedAt < startedAt)) startedAt = r.startedAt;
    }
    return { byTaskState, startedAt };
  }

  /** Chunks whose task ended and are not settled: of these tasks, or (a sweep) of any running map. */
  endedChunks(taskIds: string[] | undefined, limit: number): Promise<EndedChunk[]> {
    return taskIds
      ? this.rows<EndedChunk>(
          `SELECT ${ENDED_COLUMNS} FROM map_chunks c JOIN tasks t ON t.id = c.task_id JOIN maps m ON m.id = c.map_id
           WHERE c.task_id = ANY($1::uuid[]) AND c.settled_seq IS NULL AND t.state IN ${FINAL} LIMIT $2`,
          [taskIds, limit],
        )
      : this.rows<EndedChunk>(
          `SELECT ${ENDED_COLUMNS} FROM maps m JOIN map_chunks c ON c.map_id = m.id AND c.settled_seq IS NULL JOIN tasks t ON t.id = c.task_id
           WHERE m.state IN ('running', 'failed', 'cancelled') AND m.accepted_at IS NOT NULL AND t.state IN ${FINAL}
           ORDER BY c.map_id, c.chunk LIMIT $1`,
          [limit],
        );
  }

  /**
   * Settles chunks of one map once, in one statement: each one's outcomes beside it with the next
   * completion number, and the map's counts moved by all of them. A running map whose inputs are
   * all settled is complete, unless a chunk settled here has an error and the map does not keep
   * errors in place: it stays running for its caller to fail it (`end`), whichever chunk of the
   * batch came last. The chunks are locked in chunk order, then the map, so two replicas settling
   * the same chunks wait for each other instead of deadlocking. Answers the map's state after and
   * the chunks settled here (those settled already are left out), or undefined when none was.
   */
  async settleMany(
    mapId: string,
    settles: { chunk: number; outcomes: InputOutcome[] }[],
  ): Promise<{ state: MapState; chunks: number[] } | undefined> {
    const count = (outcomes: InputOutcome[], s: InputOutcome['status']) => outcomes.filter((o) => o.status === s).length;
    const rows = await this.rows<{ state: MapState; chunks: number[] }>(
      `WITH input AS (SELECT * FROM unnest($2::int[], $3::jsonb[], $4::int[], $5::int[], $6::int[]) AS i(chunk, outcomes, ok, failed, cancelled)),
       locked AS (SELECT c.chunk FROM map_chunks c WHERE c.map_id = $1 AND c.chunk = ANY($2::int[]) AND c.settled_seq IS NULL
                  ORDER BY c.chunk FOR UPDATE),
       settled AS (
         UPDATE map_chunks c SET outcomes = i.outcomes, settled_seq = nextval('map_settle_seq')
         FROM input i JOIN locked l ON l.chunk = i.chunk
         WHERE c.map_id = $1 AND c.chunk = i.chunk AND c.settled_seq IS NULL RETURNING c.chunk, i.ok, i.failed, i.cancelled),
       moved AS (SELECT count(*) AS n, coalesce(sum(ok), 0) AS ok, coalesce(sum(failed), 0) AS failed,
                        coalesce(sum(cancelled), 0) AS cancelled, array_agg(chunk ORDER BY chunk) AS chunks FROM settled)
       UPDATE maps m SET succeeded = succeeded + s.ok, failed = m.failed + s.failed, cancelled = m.cancelled + s.cancelled,
         state = CASE WHEN state = 'running' AND succeeded + m.failed + m.cancelled + s.ok + s.failed + s.cancelled >= total
                       AND (return_exceptions OR s.failed = 0) THEN 'complete' ELSE state END,
         ended_at = CASE WHEN state = 'running' AND succeeded + m.failed + m.cancelled + s.ok + s.failed + s.cancelled >= total
                          AND (return_exceptions OR s.failed = 0) THEN now() ELSE ended_at END
       FROM moved s WHERE m.id = $1 AND s.n > 0 RETURNING m.state, s.chunks`,
      [
        mapId,
        settles.map((s) => s.chunk),
        settles.map((s) => JSON.stringify(s.outcomes)),
        settles.map((s) => count(s.outcomes, 'ok')),
        settles.map((s) => count(s.outcomes, 'error')),
        settles.map((s) => count(s.outcomes, 'cancelled')),
      ],
    );
    return rows[0];
  }

  /** A running (or accepting) map ends: failed with its first error, or cancelled. False when it had ended already. */
  async end(mapId: string, state: 'failed' | 'cancelled', error: string): Promise<boolean> {
    const rows = await this.rows(
      `UPDATE maps SET state = $2, error = $3, ended_at = now() WHERE id = $1 AND state IN ('accepting', 'running') RETURNING id`,
      [mapId, state, error],
    );
    return rows.length > 0;
  }

  /**
   * Every task of the map not yet final becomes CANCELLED with the reason; what they were, for
   * stopping them. Rows are locked in id order, as the batched task statements lock them, so a
   * cancel racing the map's own publishes and starts never deadlocks with them.
   */
  async cancelTasks(mapId: string, reason: string): Promise<CancelledTask[]> {
    const rows = await this.rows<Omit<CancelledTask, 'streamSeq'> & { streamSeq: string | null }>(
      `WITH before AS (SELECT t.id, t.state, t.machine_id, t.attempts FROM map_chunks c JOIN tasks t ON t.id = c.task_id
                       WHERE c.map_id = $1 AND t.state NOT IN ${FINAL} ORDER BY t.id FOR UPDATE OF t)
       UPDATE tasks t SET state = 'CANCELLED', error = $2, ended_at = now(), updated_at = now() FROM before WHERE t.id = before.id
       RETURNING t.id, before.state AS was, before.machine_id AS "machineId", before.attempts, t.stream_seq AS "streamSeq",
                 t.deployment_id AS "deploymentId", t.deployment_version AS version, t.ended_at AS "endedAt"`,
      [mapId, reason],
    );
    return rows.map((r) => ({ ...r, streamSeq: r.streamSeq === null ? null : Number(r.streamSeq) }));
  }

  /** Chunks from `fromChunk` in input order, settled or not (the reader stops at the first unsettled one). */
  async inInputOrder(mapId: string, fromChunk: number, limit: number): Promise<SettledChunk[]> {
    return this.settledRows(
      `SELECT chunk, first_index AS "firstIndex", size, outcomes, settled_seq AS "settledSeq" FROM map_chunks
       WHERE map_id = $1 AND chunk >= $2 ORDER BY chunk LIMIT $3`,
      [mapId, fromChunk, limit],
    );
  }

  /** Settled chunks after completion number `afterSeq`, in completion order. */
  async inCompletionOrder(mapId: string, afterSeq: number, limit: number): Promise<SettledChunk[]> {
    return this.settledRows(
      `SELECT chunk, first_index AS "firstIndex", size, outcomes, settled_seq AS "settledSeq" FROM map_chunks
       WHERE map_id = $1 AND settled_seq > $2 ORDER BY settled_seq LIMIT $3`,
      [mapId, afterSeq, limit],
    );
  }

  private async settledRows(sql: string, args: unknown[]): Promise<SettledChunk[]> {
    const rows = await this.rows<Omit<SettledChunk, 'settledSeq'> & { settledSeq: string | null }>(sql, args);
    return rows.map((r) => ({ ...r, settledSeq: r.settledSeq === null ? null : Number(r.settledSeq) }));
  }
}
