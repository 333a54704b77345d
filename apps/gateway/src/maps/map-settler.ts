import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { getTaskResult, Messaging } from '#tern/messaging';
import { type EndedChunk, type InputOutcome, MapsRepository } from '#tern/persistence';
import { mapLimit, Ticker } from '#tern/timing';
import { TasksService } from '../tasks/tasks.service.js';
import { TaskTransitions } from '../tasks/task-transitions.js';
import { TaskWaiters } from '../tasks/task-waiters.js';

export const SETTLE_EVERY_MS = 2_000;
/**
 * The sweep's least spacing. Every task's end pokes the settler (most are no map's chunks), so a
 * sweep on every poke was one query per task; the tick still sweeps at least once a period.
 */
export const SWEEP_SPACING_MS = SETTLE_EVERY_MS / 2;
const BATCH = 500;

/**
 * Settles a map's chunks once their tasks end: each input's outcome copied beside its chunk,
 * the map's counts and state moved on, and a map without return_exceptions failed at its first
 * error (what has not finished is cancelled). Woken by every task's end (TaskWaiters.onEnded); a sweep every tick
 * (not on every notice: see SWEEP_SPACING_MS) catches what a notice missed (a restart, another replica's). Several replicas may settle one
 * chunk at once: the repository settles it once.
 */
@Injectable()
export class MapSettler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('map-settler');
  private readonly ticker = new Ticker({ name: 'map settler', everyMs: SETTLE_EVERY_MS, logger: this.logger }, () => this.run());
  private noticed = new Set<string>();
  private sweptAt = -Infinity;

  constructor(
    private readonly maps: MapsRepository,
    private readonly messaging: Messaging,
    private readonly tasks: TasksService,
    private readonly waiters: TaskWaiters,
    private readonly transitions: TaskTransitions,
  ) {}

  onApplicationBootstrap() {
    this.waiters.onEnded((taskId) => {
      this.noticed.add(taskId);
      this.ticker.poke();
    });
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  async run(): Promise<void> {
    while (this.noticed.size) {
      const ids = [...this.noticed].slice(0, BATCH);
      for (const id of ids) this.noticed.delete(id);
      await this.settleAll(await this.maps.endedChunks(ids, BATCH));
    }
    if (Date.now() - this.sweptAt < SWEEP_SPACING_MS) return;
    this.sweptAt = Date.now();
    let swept: EndedChunk[];
    do {
      swept = await this.maps.endedChunks(undefined, BATCH);
      await this.settleAll(swept);
    } while (swept.length === BATCH && !this.ticker.stopping);
  }

  /** Each map's ended chunks settled in one statement, its readers woken once. */
  private async settleAll(chunks: EndedChunk[]) {
    const byMap = new Map<string, EndedChunk[]>();
    for (const chunk of chunks) {
      const ofMap = byMap.get(chunk.mapId);
      if (ofMap) ofMap.push(chunk);
      else byMap.set(chunk.mapId, [chunk]);
    }
    for (const [mapId, ofMap] of byMap) await this.settleOfMap(mapId, ofMap);
  }

  private async settleOfMap(mapId: string, chunks: EndedChunk[]): Promise<void> {
    // A large result is read from the object store: a few at a time.
    const withOutcomes = await mapLimit(chunks, 8, async (chunk) => ({ chunk, outcomes: await this.outcomes(chunk) }));
    withOutcomes.sort((a, b) => a.chunk.chunk - b.chunk.chunk);
    const settled = await this.maps.settleMany(
      mapId,
      withOutcomes.map(({ chunk, outcomes }) => ({ chunk: chunk.chunk, outcomes })),
    );
    if (!settled) return;
    this.waiters.wake(mapId);
    if (settled.state !== 'running') return;
    // Without return_exceptions, the map fails at its first error (the first in input order when several settled at once).
    const now = new Set(settled.chunks);
    for (const { chunk, outcomes } of withOutcomes) {
      const failedAt = outcomes.findIndex((o) => o.status === 'error');
      if (!now.has(chunk.chunk) || failedAt < 0 || chunk.returnExceptions) continue;
      const error = `input ${chunk.firstIndex + failedAt}: ${(outcomes[failedAt] as { error: string }).error}`;
      if (await this.maps.end(mapId, 'failed', error))
        await this.cancelRest(mapId, chunk.workspaceId, `cancelled: ${error} failed its map`);
      return;
    }
  }

  /** Every input's outcome: the runner's list for a completed chunk, the task's error for each input of any other. */
  private async outcomes(chunk: EndedChunk): Promise<InputOutcome[]> {
    const all = (o: InputOutcome) => Array.from({ length: chunk.size }, () => o);
    if (chunk.taskState !== 'COMPLETE') {
      const error = chunk.error ?? chunk.taskState;
      if (chunk.taskState === 'CANCELLED') return all({ status: 'cancelled', error });
      // The runner names the input that failed its chunk: that one has the error, the rest were never reached.
      const named = /^(?:MapInputError: )?input (\d+) of the chunk: ([\s\S]*)$/.exec(error);
      if (!named || Number(named[1]) >= chunk.size) return all({ status: 'error', error });
      const at = Number(named[1]);
      return Array.from({ length: chunk.size }, (_, k): InputOutcome =>
        k === at
          ? { status: 'error', error: named[2] }
          : { status: 'cancelled', error: `not run: input ${chunk.firstIndex + at} failed its chunk` },
      );
    }
    const result = chunk.resultRef ? await getTaskResult(this.messaging, chunk.resultRef) : chunk.result;
    if (!Array.isArray(result) || result.length !== chunk.size || !result.every(isOutcome))
      return all({ status: 'error', error: "the chunk's answer was not one outcome per input: is the function served by Tern's runner?" });
    return result;
  }

  /** A map ended early (its first error, or a cancel): what has not finished is cancelled, a running chunk stopped. */
  async cancelRest(mapId: string, workspaceId: string, reason: string): Promise<number> {
    const cancelled = await this.maps.cancelTasks(mapId, reason);
    for (const t of cancelled) {
      this.transitions.announce(t.id, workspaceId, 'CANCELLED', t.endedAt.toISOString());
      await this.tasks.stopCancelled(t, workspaceId, reason);
    }
    return cancelled.length;
  }
}

function isOutcome(o: unknown): o is InputOutcome {
  const v = o as { status?: unknown; error?: unknown } | null;
  return !!v && (v.status === 'ok' || (v.status === 'error' && typeof v.error === 'string'));
}
