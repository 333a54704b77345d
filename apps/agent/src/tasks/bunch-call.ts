import type { ClientRequest } from 'node:http';
import type { Logger } from '@nestjs/common';
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import { LRUCache } from 'lru-cache';
import { smoothed } from '#tern/timing';
import { MAP_BUNCH_KEY, MAP_CHUNK_KEY, RUNNER_BUNCHES_HEADER, TASK_RESULT_MAX_BYTES, type TaskItem } from '#tern/contracts';
import type { ContainerEndpoint } from '../invoke/forward.js';
import { handlerError, type HandlerOutcome, taskRequest } from './call-handler.js';
import { bunchesOf, isMapChunk } from './bunches.js';

/** A bunch holds no more than its runner is about to run: its members' mean durations add up to about this. */
const BUNCH_BUDGET_MS = 100;
/**
 * The runner begins no member once the call has run this long: a bunch sized by a mean that no
 * longer holds (a map of slow chunks after quick ones) leaves the rest unstarted, to run alone.
 */
const BUNCH_RUNNER_BUDGET_MS = 2 * BUNCH_BUDGET_MS;
export const MAX_BUNCH = 32;
/** The shortest wait JetStream's client allows a pull; a bunch's pull asks only for what the consumer has. */
const BUNCH_PULL_EXPIRES_MS = 1000;

/** The map a chunk belongs to (`map_id` under MAP_CHUNK_KEY; chunks queued by an older gateway carry none). */
function mapOf(task: TaskItem): string | undefined {
  const chunk = (task.payload as Record<string, unknown>)[MAP_CHUNK_KEY] as { map_id?: unknown } | null;
  return typeof chunk?.map_id === 'string' ? chunk.map_id : undefined;
}

/** Weight of the newest chunk's duration in its map's running mean. */
const CHUNK_DURATION_WEIGHT = 0.3;

/**
 * Each map's mean chunk duration on this machine, which sizes its bunches: a map's chunks take
 * about the same time as each other, not as another map's on the same deployment (a map of
 * one-second chunks after one of millisecond chunks would otherwise be pulled 10 to a slot, and
 * its retries wait behind them). A map's first chunk here goes alone.
 */
export class ChunkDurations {
  private readonly means = new LRUCache<string, number>({ max: 1024 });

  /** The chunk's map's mean, or `fallback` for a chunk that names no map and for a plain task. */
  mean(task: TaskItem, fallback: number | undefined): number | undefined {
    const map = isMapChunk(task) ? mapOf(task) : undefined;
    return map === undefined ? fallback : this.means.get(map);
  }

  ended(task: TaskItem, durationMs: number): void {
    const map = isMapChunk(task) ? mapOf(task) : undefined;
    if (map === undefined) return;
    this.means.set(map, smoothed(this.means.get(map), durationMs, CHUNK_DURATION_WEIGHT));
  }
}

/** The container's other slots, as a slot sizes its bunch: waiting in a pull or pulling a bunch now, or running. */
export interface OtherSlots {
  readonly pulling: number;
  readonly running: number;
}

/**
 * How many tasks a slot takes in one pull: none of its budget known yet (no chunk of the map, or
 * no task of the version, timed here) is one; else as many as fit BUNCH_BUDGET_MS at the mean
 * duration, at most MAX_BUNCH, and no more than the slot's share of what the consumer holds now
 * (`pending` after the message in hand), so a bunch's pull does not wait on tasks other slots take
 * (JetStream's client gives a pull at least a second, and the bunch waits for all of it): one left
 * for each slot running (it takes one when it comes back, and sizes its own bunch then), the rest
 * shared with those pulling beside it.
 */
export function bunchSize(meanDurationMs: number | undefined, pending: number, others: OtherSlots): number {
  if (!meanDurationMs && meanDurationMs !== 0) return 1;
  const byDuration = Math.floor(BUNCH_BUDGET_MS / Math.max(1, meanDurationMs));
  const share = Math.floor(Math.max(0, pending - others.running) / (1 + others.pulling));
  return Math.max(1, Math.min(MAX_BUNCH, byDuration, 1 + share));
}

/** Up to `count` more messages from the consumer, in one pull; what came before an error (logged), which is held all the same. */
export async function pullMore(consumer: Consumer, count: number, logger: Logger): Promise<JsMsg[]> {
  const got: JsMsg[] = [];
  try {
    for await (const msg of await consumer.fetch({ max_messages: count, expires: BUNCH_PULL_EXPIRES_MS })) got.push(msg);
  } catch (e) {
    logger.warn(`pulling a bunch of tasks: ${(e as Error).message}; running the ${got.length + 1} in hand`);
  }
  return got;
}

/** One task of a bunch (a map chunk or a plain task): its id, the attempt this delivery is, its payload. */
export interface BunchMember {
  readonly taskId: string;
  readonly attempt: number;
  readonly payload: unknown;
}

interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * One call of a runner with a bunch of tasks (POST / with `MAP_BUNCH_KEY` and `budget_ms`):
 * the runner runs them in turn, answering two NDJSON lines per task, `{task_id, begun: true}` as
 * it begins and `{task_id, status, body}` as it ends, so each member has its own turn and outcome.
 * The runner begins no member once the call has run `budget_ms`, and ends the answer. The call
 * ends early then, or on a hang-up (`hangUp`: the runner ends the worker, as for a single task's
 * timeout), a broken connection or a runner that did not take the bunch: a member running then
 * gets `aborted` or `gone`, and those after it never had their turn (`turn` answers false), so
 * they are run one per call afterwards and spend no attempt here.
 */
export class BunchCall {
  private readonly turns: Deferred<boolean>[];
  private readonly outcomes: Deferred<HandlerOutcome>[];
  /** The member begun last; `running` while its outcome has not come. */
  private current = -1;
  private running = false;
  private ended = false;
  private hungUp = false;
  private readonly req: ClientRequest;

  constructor(
    endpoint: ContainerEndpoint,
    private readonly members: readonly BunchMember[],
  ) {
    this.turns = members.map(() => deferred<boolean>());
    this.outcomes = members.map(() => deferred<HandlerOutcome>());
    const body = Buffer.from(
      JSON.stringify({
        [MAP_BUNCH_KEY]: members.map((m) => ({ task_id: m.taskId, attempt: m.attempt, payload: m.payload })),
        budget_ms: BUNCH_RUNNER_BUDGET_MS,
      }),
    );
    // The runner watches a task's caller (a hang-up ends the worker); the bunch goes by its first member.
    this.req = taskRequest(endpoint, members[0]!.taskId, members[0]!.attempt, body);
    this.req.on('error', (e) => this.end({ kind: 'gone', message: e.message }));
    this.req.on('response', (res) => {
      // Anything but a bunch's answer ran none of them (still starting, or a runner that does not take bunches).
      if (res.statusCode !== 200 || bunchesOf(res.headers[RUNNER_BUNCHES_HEADER]) === 'none') {
        res.resume();
        return this.end({ kind: 'gone', message: `the runner did not take the bunch (it answered ${res.statusCode})` });
      }
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        pending += text;
        let newline: number;
        while (!this.ended && (newline = pending.indexOf('\n')) >= 0) {
          this.line(pending.slice(0, newline));
          pending = pending.slice(newline + 1);
        }
        if (!this.ended && pending.length > TASK_RESULT_MAX_BYTES + 64 * 1024)
          this.fail(
            `the handler's result is over the ${TASK_RESULT_MAX_BYTES / 1024 / 1024} MiB limit for task results: store large outputs elsewhere (a volume, a bucket) and return a reference`,
          );
      });
      res.on('error', (e) => this.end({ kind: 'gone', message: e.message }));
      res.on('end', () => this.end({ kind: 'gone', message: 'the runner ended the bunch while it ran this task' }));
    });
    this.req.end(body);
  }

  /** Resolves when member `i` begins in the runner (true), or false once the call ended before its turn. */
  turn(i: number): Promise<boolean> {
    return this.turns[i]!.promise;
  }

  /** Member `i`'s outcome; asked only once its turn came. */
  outcome(i: number): Promise<HandlerOutcome> {
    return this.outcomes[i]!.promise;
  }

  /**
   * Ends the call for member `i`'s timeout, if it is still running (one that has ended leaves the
   * next member running): the runner ends the worker; `i` is aborted, those after it never begin.
   */
  hangUp(i: number): void {
    if (this.ended || this.current !== i || !this.running) return;
    this.hungUp = true;
    this.req.destroy();
    this.end({ kind: 'aborted' });
  }

  /** A line of the answer: the next member begun, or the outcome of the one running. */
  private line(text: string) {
    let parsed: { task_id?: unknown; begun?: unknown; status?: unknown; body?: unknown };
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      return this.fail(`the runner's answer to a bunch has a line that is not JSON`);
    }
    const due = this.running ? this.members[this.current]! : this.members[this.current + 1];
    if (!due || parsed.task_id !== due.taskId || (this.running ? typeof parsed.status !== 'number' : parsed.begun !== true))
      return this.fail(`the runner answered ${text.slice(0, 200)} where task ${due?.taskId ?? '(none)'} was due`);
    if (!this.running) {
      this.current++;
      this.running = true;
      return this.turns[this.current]!.resolve(true);
    }
    this.running = false;
    const status = parsed.status as number;
    const data = Buffer.from(JSON.stringify(parsed.body ?? null));
    this.outcomes[this.current]!.resolve(
      status === 200 ? { kind: 'ok', json: data } : { kind: 'error', status, ...handlerError(status, data) },
    );
    if (this.current === this.members.length - 1) this.ended = true;
  }

  /** A line that cannot be believed: the member running (if any) fails, and the call ends (the worker with it). */
  private fail(message: string) {
    // Settled first: end() finds it settled and leaves it.
    if (this.running) this.outcomes[this.current]!.resolve({ kind: 'error', message });
    this.req.destroy();
    this.end({ kind: 'gone', message });
  }

  /** The call is over: the member running gets `outcome` (aborted after a hang-up), those after it never had their turn. */
  private end(outcome: HandlerOutcome) {
    if (this.ended) return;
    this.ended = true;
    if (this.running) this.outcomes[this.current]!.resolve(this.hungUp ? { kind: 'aborted' } : outcome);
    for (let i = this.current + 1; i < this.members.length; i++) this.turns[i]!.resolve(false);
  }
}
