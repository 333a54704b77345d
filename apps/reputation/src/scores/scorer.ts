import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import {
  REPUTATION_BUCKET,
  REPUTATION_BUCKET_TTL_MS,
  REPUTATION_LEADER_BUCKET,
  REPUTATION_SCORE,
  type ReputationEntry,
} from '#tern/contracts';
import { type KV } from '@nats-io/kv';
import { Lease, Messaging } from '#tern/messaging';
import { ReputationRepository } from '#tern/persistence';
import {
  DAY_MS,
  heartbeatsOf,
  historyDue,
  type MachineRecord,
  machineRecordOf,
  type MachineScore,
  peerInputs,
  type ReputationParams,
  scoreMachine,
  type Standing,
} from '#tern/reputation';
import { recomputeSeconds, reputationScore } from './metrics.js';
import { REPUTATION_PARAMS } from './reputation-params.js';
import { Ticker } from '#tern/timing';

/** After an event, scores are recomputed this soon (events in a burst share one pass). */
const AFTER_EVENT_MS = 200;
/** The KV entry of an unchanged score is put again this often, well inside the bucket's TTL. */
const KV_REFRESH_MS = 10 * 60_000;
/** A machine with no event for this long (the longest uptime period) is no longer scored. */
const FORGET_AFTER_MS = 30 * DAY_MS;
/**
 * Each pass reads the records changed since the previous read less this: a change stamped when
 * its transaction began but committed after that read is read on the next one.
 */
const COMMIT_LAG_MS = 5000;
/** A move of a score's components alone waits this long after its last history row (historyDue). */
const COMPONENTS_HISTORY_MS = 5 * 60_000;
/**
 * A pass over a large fleet yields to the event loop after this many records read or scored, so
 * the heartbeats that arrive meanwhile are handled between slices, not after the whole pass
 * (bench/agents README: at 20,000 machines a pass held the loop for long enough to put the
 * heartbeats' p99 lag past 1 s).
 */
const SLICE = 1000;
/**
 * Machines one periodic pass scores at most: a larger fleet is scored in turns, every machine
 * once a round of ⌈machines / this⌉ periods (20,000 machines: every 50 s with the 5 s default),
 * its heartbeats read at the round's start. Scoring is tens of µs a machine (bench/agents
 * per-beat.js: 0.9 s for 20,000 at load 17), so scoring every machine every period cost that
 * much of a core every 5 s, for scores that between events move only with punctuality and
 * time, both slowly. Events' machines are still scored 200 ms after the events.
 */
const SCORED_PER_PERIOD = 2000;

interface Published {
  score: number;
  components: Record<string, number>;
  observed: number;
  standing: Standing;
  historyAt: number;
  kvAt: number;
}

/**
 * Recomputes every machine's score on a timer (in turns of SCORED_PER_PERIOD machines a period),
 * and soon after an event the scores of the machines whose records it changed (against the same
 * peers: the scores a pass over every machine would give them; the others' move only with time
 * and punctuality, which the timer's passes follow). A score that moved
 * meaningfully (or whose last history row is REPUTATION_HISTORY_INTERVAL_SECONDS old) gets a
 * history row in reputation_scores, a REPUTATION_SCORE event and a fresh entry in the
 * `reputation` KV bucket, which the scheduler reads.
 *
 * Only the replica holding the `reputation-leader` lease scores, so a score is published once.
 * It keeps a copy of the records, brought up to date from the table at each pass (what any
 * replica changed since the last); a replica that takes the lease over starts with every record.
 */
@Injectable()
export class Scorer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('scorer');
  private readonly lease: Lease;
  private readonly records = new Map<string, MachineRecord>();
  private readonly published = new Map<string, Published>();
  /** Machines whose records an event changed since the last pass. */
  private readonly changed = new Set<string>();
  /** When the last periodic pass began. */
  private everyAt = 0;
  /** The machines the round of periodic passes under way has yet to score, next first. */
  private round: string[] = [];
  /** The database time of the last read of changed records; undefined while not scoring. */
  private readAt?: Date;
  /** The same, of the last read that took changed heartbeats too (a pass over every machine). */
  private heartbeatsReadAt?: Date;
  private ticker?: Ticker;
  private soon?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly reputation: ReputationRepository,
    private readonly messaging: Messaging,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
    @Inject(REPUTATION_PARAMS) private readonly params: ReputationParams,
  ) {
    this.lease = new Lease(messaging, REPUTATION_LEADER_BUCKET, 'scores machines');
  }

  async onApplicationBootstrap() {
    await this.lease.start();
    const everyMs = this.config.reputation.recomputeIntervalMs;
    this.ticker = new Ticker({ name: 'recomputing scores', everyMs, logger: this.logger, immediate: true }, () => this.recompute()).start();
  }

  async onApplicationShutdown() {
    this.stopped = true;
    clearTimeout(this.soon);
    await this.ticker?.stop();
    await this.lease.stop();
  }

  /** Asks for the machine to be scored shortly (an event changed its record). */
  nudge(machineId: string) {
    this.changed.add(machineId);
    if (this.soon || this.stopped) return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      this.ticker?.poke();
    }, AFTER_EVENT_MS);
  }

  /**
   * One pass by the lease holder: once a period, the next turn of a round over every machine
   * (the whole round at once up to SCORED_PER_PERIOD machines); in between, the machines events
   * changed (a period's pokes are far more than its one tick: each state change is one).
   */
  private async recompute(now = Date.now()): Promise<void> {
    if (!this.lease.held()) return this.forget();
    // Taken before the read: a machine changed after it is scored on the next pass.
    const changedIds = new Set(this.changed);
    const eventsChanged = new Set(changedIds);
    this.changed.clear();
    // The period's own tick may come a little early of a period since the last: slack.
    const periodic = now - this.everyAt >= 0.9 * this.config.reputation.recomputeIntervalMs;
    const roundStarts = periodic && !this.round.length;
    await this.catchUp(roundStarts);
    const live = (r: MachineRecord) => {
      const last = Math.max(r.transitions.at(-1)?.at ?? 0, r.heartbeats.lastArrival ?? 0, r.measuredNetwork?.testedAt ?? 0);
      return now - last < FORGET_AFTER_MS;
    };
    const records = [...this.records.values()].filter(live);
    if (roundStarts) this.round = records.map((r) => r.machineId);
    if (periodic) {
      this.everyAt = now;
      for (const id of this.round.splice(0, SCORED_PER_PERIOD)) changedIds.add(id);
    }
    const toScore = [...changedIds].flatMap((id) => this.records.get(id) ?? []).filter(live);
    if (!records.length || !toScore.length) return;
    const timer = recomputeSeconds.startTimer();
    const peers = peerInputs(records, now, this.params);
    const scores: MachineScore[] = [];
    for (let i = 0; i < toScore.length; i += SLICE) {
      if (i) await nextTurn();
      for (const r of toScore.slice(i, i + SLICE)) {
        const s = scoreMachine(r, peers, now, this.params);
        reputationScore.set({ machine: s.machineId }, s.score);
        scores.push(s);
      }
    }
    const cadence = { everyMs: this.config.reputation.historyIntervalSeconds * 1000, componentsMs: COMPONENTS_HISTORY_MS };
    const history = new Set<MachineScore>();
    const due: MachineScore[] = [];
    for (const s of scores) {
      const prev = this.published.get(s.machineId);
      if (historyDue(prev, s, now, cadence)) history.add(s);
      // An event's machine shows what the event changed (its count of outcomes, a small move)
      // in its entry at once, without a history row: bounded by the events, one put a pass.
      else if (!(eventsChanged.has(s.machineId) && entryMoved(prev!, s)) && now - (prev?.kvAt ?? 0) < KV_REFRESH_MS) continue;
      due.push(s);
    }
    const computedAt = new Date(now).toISOString();
    const kv = await this.messaging.kv({ name: REPUTATION_BUCKET.name, ttlMs: REPUTATION_BUCKET_TTL_MS });
    // A slice at a time: its history rows in one statement, then its puts and events all at once
    // (the client pipelines them). A machine whose put fails is retried next pass.
    for (let i = 0; i < due.length; i += SLICE) {
      const slice = due.slice(i, i + SLICE);
      await this.reputation.appendScores(
        slice.filter((s) => history.has(s)),
        new Date(now),
      );
      await Promise.all(slice.map((s) => this.publish(kv, s, history.has(s), computedAt, now)));
    }
    timer();
    if (history.size) this.logger.debug({ machines: [...history].map((s) => `${s.machineId}=${s.score}`) }, 'scores changed');
  }

  /** The score's KV entry, and with a history row its REPUTATION_SCORE event; remembered as published once stored. */
  private async publish(kv: KV, s: MachineScore, historic: boolean, computedAt: string, now: number): Promise<void> {
    const entry: ReputationEntry = { score: s.score, components: s.components, observed: s.observed, standing: s.standing, computedAt };
    await kv.put(s.machineId, JSON.stringify(entry));
    if (historic)
      await this.messaging.publish(REPUTATION_SCORE, { machineId: s.machineId, ...entry }, { msgId: `${s.machineId}:${computedAt}` });
    const prev = this.published.get(s.machineId);
    this.published.set(s.machineId, {
      score: s.score,
      components: s.components,
      observed: s.observed,
      standing: s.standing,
      historyAt: historic ? now : (prev?.historyAt ?? 0),
      kvAt: now,
    });
  }

  /**
   * Brings the copy of the records up to date. On the first pass after taking the lease: every
   * record, and the scores another replica published last (kvAt 0: every entry is put again
   * on this pass, in case the bucket lost it meanwhile). Changed heartbeats only with
   * `heartbeats` (a round's start): every machine beats every period, so reading them on each
   * event's pass read most of the table several times a second (bench/agents README, run Y), for
   * punctuality that moves slowly and that only the periodic passes score anyway.
   */
  private async catchUp(heartbeats: boolean): Promise<void> {
    if (!this.readAt) {
      for (const r of await this.reputation.latestScores())
        this.published.set(r.machineId, {
          score: r.score,
          components: r.components,
          observed: r.observed,
          standing: r.standing,
          historyAt: r.computedAt.getTime(),
          kvAt: 0,
        });
    }
    const lagged = (at?: Date) => (at ? new Date(at.getTime() - COMMIT_LAG_MS) : null);
    const { records, readAt } = await this.reputation.machineRecordsChangedSince(
      lagged(this.readAt),
      heartbeats || !this.heartbeatsReadAt ? lagged(this.heartbeatsReadAt) : false,
    );
    for (const [i, stored] of records.entries()) {
      if (i && i % SLICE === 0) await nextTurn();
      const known = this.records.get(stored.machineId);
      if (stored.record || !known)
        this.records.set(stored.machineId, machineRecordOf(stored.machineId, stored.pool, stored.record, stored.heartbeats));
      else known.heartbeats = heartbeatsOf(stored.heartbeats);
    }
    if (!this.readAt) this.logger.log(`scoring the records of ${records.length} machine(s)`);
    this.readAt = readAt;
    if (heartbeats || !this.heartbeatsReadAt) this.heartbeatsReadAt = readAt;
  }

  /** Not the lease holder: the copy would go stale; a later lease starts afresh. */
  private forget(): void {
    this.changed.clear();
    this.everyAt = 0;
    this.round = [];
    if (!this.readAt) return;
    this.records.clear();
    this.published.clear();
    this.readAt = undefined;
    this.heartbeatsReadAt = undefined;
  }
}

/** Whether the entry a score makes differs from the one published last. */
function entryMoved(prev: Published, s: MachineScore): boolean {
  if (prev.score !== s.score || prev.observed !== s.observed || prev.standing !== s.standing) return true;
  for (const [k, v] of Object.entries(s.components)) if (prev.components[k] !== v) return true;
  return false;
}
