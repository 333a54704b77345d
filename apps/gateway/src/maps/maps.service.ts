import { Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { type MapResultLine, type MapStarted, type MapView, type TaskState } from '#tern/contracts';
import { type InputOutcome, type MapRow, MapsRepository, type SettledChunk, type StagedChunk, TasksRepository } from '#tern/persistence';
import { ChunkTooLargeError, chunkCount, chunkOf, type MapChunk, MapChunker } from '#tern/tasks';
import { fireAndForget } from '#tern/timing';
import { ApiError } from '#tern/service';
import type { Principal } from '../auth/principal.js';
import { TaskSubmissionService } from '../tasks/task-submission.service.js';
import { TaskWaiters } from '../tasks/task-waiters.js';
import type { StartMapQuery } from './dto/start-map.query.js';
import { readInputs } from './map-inputs.js';
import { MapSettler } from './map-settler.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Chunks staged per statement while the body streams in. */
const STAGE_CHUNKS = 500;
const STAGE_BYTES = 4 * 2 ** 20;
/** Chunks published to TASKS at once after the map is accepted. */
const PUBLISH_AT_ONCE = 32;
/** Chunks read per query by /results. */
const READ_CHUNKS = 200;
/** How long a /results reader waits for the next chunk before reading again (a settle on another replica). */
const RESULTS_RECHECK_MS = 1_000;

/**
 * Maps: a function fanned out over many inputs in chunks, server-side. The inputs are staged as
 * they stream in and become tasks only once all are in (so a map either runs whole or not at
 * all); the answer comes after that, and the chunks go to TASKS after it (the task relay sends
 * any a dead gateway left unsent). The settler turns ended chunks into outcomes; /results
 * reads those back in order, as they come.
 */
@Injectable()
export class MapsService {
  private readonly logger = new Logger('maps');

  constructor(
    private readonly maps: MapsRepository,
    private readonly tasks: TasksRepository,
    private readonly submissions: TaskSubmissionService,
    private readonly settler: MapSettler,
    private readonly waiters: TaskWaiters,
  ) {}

  async start(principal: Principal, name: string, version: number | undefined, body: Readable, q: StartMapQuery): Promise<MapStarted> {
    const record = await this.submissions.queue(principal, name, version, 'function');
    const policy = record.spec.taskPolicy!;
    const chunkSize = q.chunk_size ?? 1;
    const map = {
      id: randomUUID(),
      workspaceId: record.workspaceId,
      deploymentId: record.deploymentId,
      version: record.version,
      chunkSize,
      returnExceptions: q.return_exceptions ?? false,
      order: q.order ?? 'input',
      maxRetries: q.max_retries ?? policy.maxRetries,
      timeoutSeconds: q.timeout ?? policy.timeoutSeconds,
    } as const;
    await this.maps.create(map);
    let total: number;
    try {
      total = await this.stageInputs(map.id, chunkSize, body);
      if (!total) throw new ApiError(400, 'the map has no inputs: send a JSON array of input objects, or NDJSON with one per line');
      await this.maps.accept(map.id, total);
    } catch (e) {
      await this.maps
        .discard(map.id)
        .catch((err: Error) => this.logger.warn({ mapId: map.id, err: err.message }, 'could not discard a map'));
      if (e instanceof ApiError) throw e;
      if (body.destroyed || (e as NodeJS.ErrnoException).code === 'ECONNRESET' || (e as Error).message === 'aborted')
        throw new ApiError(400, 'the body ended before all inputs arrived: nothing was started, send the map again');
      throw e;
    }
    fireAndForget(`publishing the chunks of map ${map.id} (the relay will)`, this.logger, this.publish(map.id));
    const chunks = chunkCount(total, chunkSize);
    this.logger.log({ mapId: map.id, deployment: record.name, total, chunks }, `map of ${total} input(s) in ${chunks} chunk(s) accepted`);
    return { map_id: map.id, total, function: record.name, version: record.version, chunk_size: chunkSize, chunks };
  }

  /** Reads the body into staged chunks (cut by MapChunker), a batch per statement; answers how many inputs there were. */
  private async stageInputs(mapId: string, chunkSize: number, body: Readable): Promise<number> {
    const chunker = new MapChunker(chunkSize);
    let batch: StagedChunk[] = [];
    let batchBytes = 0;
    const stage = (chunk: MapChunk | undefined) => {
      if (!chunk) return;
      batch.push({ chunk: chunk.chunk, firstIndex: chunk.firstIndex, inputs: chunk.inputs });
      batchBytes += chunk.bytes;
    };
    try {
      for await (const input of readInputs(body as Readable & AsyncIterable<Buffer>)) {
        stage(chunker.add(input));
        if (batch.length >= STAGE_CHUNKS || batchBytes >= STAGE_BYTES) {
          await this.maps.stage(mapId, batch);
          batch = [];
          batchBytes = 0;
        }
      }
      stage(chunker.finish());
    } catch (e) {
      if (e instanceof ChunkTooLargeError) throw new ApiError(413, e.message);
      throw e;
    }
    if (batch.length) await this.maps.stage(mapId, batch);
    return chunker.total;
  }

  /** Publishes the map's chunks to TASKS in input order, a few at a time. */
  private async publish(mapId: string): Promise<void> {
    for (let after = -1; ;) {
      const unsent = await this.maps.unsentTasks(mapId, after, 500);
      if (!unsent.length) return;
      for (let i = 0; i < unsent.length; i += PUBLISH_AT_ONCE) {
        const batch = unsent.slice(i, i + PUBLISH_AT_ONCE);
        const seqs = await Promise.all(batch.map((t) => this.submissions.send(t)));
        // One write per batch: a write queued per chunk would hold the connection pool from
        // recording the very results the map's readers wait for.
        await this.tasks.markEnqueuedMany(
          batch.map((t) => t.id),
          seqs,
        );
      }
      after = unsent[unsent.length - 1].chunk;
    }
  }

  async get(principal: Principal, id: string): Promise<MapView> {
    return this.view(await this.row(principal, id));
  }

  async cancel(principal: Principal, id: string): Promise<MapView> {
    const map = await this.row(principal, id);
    if (!(await this.maps.end(map.id, 'cancelled', 'cancelled by the user')))
      throw new ApiError(409, `map ${id} already ended (${map.state}): nothing to cancel`);
    const stopped = await this.settler.cancelRest(map.id, map.workspaceId, 'cancelled: its map was cancelled');
    this.logger.log({ mapId: map.id, stopped }, `map cancelled: ${stopped} chunk(s) stopped`);
    return this.get(principal, id);
  }

  /** The NDJSON lines of a map's outcomes from line `from` on, streamed while it runs; checked before the first line. */
  async results(principal: Principal, id: string, from: number): Promise<AsyncGenerator<string>> {
    const map = await this.row(principal, id);
    if (from > map.total) throw new ApiError(400, `from must be at most ${map.total}: the map has ${map.total} input(s)`);
    return map.order === 'input' ? this.inInputOrder(map, from) : this.inCompletionOrder(map, from);
  }

  private async *inInputOrder(map: MapRow, from: number): AsyncGenerator<string> {
    let index = from;
    while (index < map.total) {
      const rows = await this.maps.inInputOrder(map.id, chunkOf(index, map.chunkSize), READ_CHUNKS);
      let moved = false;
      for (const row of rows) {
        if (row.settledSeq === null) break;
        yield lines(row, index - row.firstIndex);
        index = row.firstIndex + row.size;
        moved = true;
      }
      if (!moved) await this.waiters.next(map.id, RESULTS_RECHECK_MS);
    }
  }

  private async *inCompletionOrder(map: MapRow, from: number): AsyncGenerator<string> {
    let passed = 0;
    let afterSeq = 0;
    while (passed < map.total) {
      const rows = await this.maps.inCompletionOrder(map.id, afterSeq, READ_CHUNKS);
      for (const row of rows) {
        const skip = Math.max(0, Math.min(row.size, from - passed));
        if (skip < row.size) yield lines(row, skip);
        passed += row.size;
        afterSeq = row.settledSeq!;
      }
      if (!rows.length) await this.waiters.next(map.id, RESULTS_RECHECK_MS);
    }
  }

  private async row(principal: Principal, id: string): Promise<MapRow> {
    if (!UUID.test(id)) throw new ApiError(400, `"${id}" is not a map id (map ids are UUIDs, as POST /function/<name>/map returns them)`);
    const map = await this.maps.findInWorkspace(id, principal.workspaceId);
    if (!map) throw new ApiError(404, `map ${id} not found in workspace ${principal.workspaceName}`);
    return map;
  }

  private async view(map: MapRow): Promise<MapView> {
    const { byTaskState, startedAt } = await this.maps.progress(map.id);
    const sum = (states: TaskState[]) => states.reduce((n, s) => n + (byTaskState[s] ?? 0), 0);
    const settled = map.succeeded + map.failed + map.cancelled;
    const end = map.endedAt ?? new Date();
    const seconds = startedAt ? (end.getTime() - startedAt.getTime()) / 1000 : 0;
    return {
      map_id: map.id,
      function: map.deploymentName,
      version: map.version,
      status: map.state,
      done: map.state !== 'running' && map.state !== 'accepting',
      total: map.total,
      chunk_size: map.chunkSize,
      return_exceptions: map.returnExceptions,
      order: map.order,
      counts: {
        pending: sum(['PENDING', 'RETRY']),
        running: sum(['RUNNING']),
        succeeded: map.succeeded,
        failed: map.failed,
        cancelled: map.cancelled,
      },
      error: map.error,
      created_at: map.createdAt.toISOString(),
      started_at: startedAt?.toISOString() ?? null,
      ended_at: map.endedAt?.toISOString() ?? null,
      inputs_per_second: seconds > 0 ? Math.round((settled / seconds) * 10) / 10 : null,
    };
  }
}

/** A settled chunk's lines from its `skip`-th input on. */
function lines(row: SettledChunk, skip: number): string {
  let out = '';
  for (let k = skip; k < row.size; k++) {
    const o: InputOutcome = row.outcomes![k];
    const line: MapResultLine =
      o.status === 'ok'
        ? { index: row.firstIndex + k, status: 'ok', result: o.result }
        : { index: row.firstIndex + k, status: o.status, error: o.error };
    out += `${JSON.stringify(line)}\n`;
  }
  return out;
}
