import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import {
  REPUTATION_BUCKET,
  REPUTATION_BUCKET_TTL_MS,
  REPUTATION_LEADER_BUCKET,
  REPUTATION_SCORE,
  type ReputationEntry,
} from '#tern/contracts';
import { Lease, Messaging } from '#tern/messaging';
import { ReputationRepository } from '#tern/persistence';
import {
  changedMeaningfully,
  DAY_MS,
  type MachineRecord,
  machineRecordOf,
  type MachineScore,
  type ReputationParams,
  scoreMachines,
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

interface Published {
  score: number;
  components: Record<string, number>;
  standing: Standing;
  historyAt: number;
  kvAt: number;
}

/**
 * Recomputes every machine's score on a timer, and soon after an event the scores of the
 * machines whose records it changed (against the same peers: the scores a pass over every machine
 * would give them; the others' move only with time, which the timer's pass follows). A score that moved
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
  /** When the last pass over every machine began. */
  private everyAt = 0;
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
   * One pass by the lease holder: over every machine once a period, over the machines events
   * changed in between (a period's pokes are far more than its one tick: each state change is one).
   */
  private async recompute(now = Date.now()): Promise<void> {
    if (!this.lease.held()) return this.forget();
    // Taken before the read: a machine changed after it is scored on the next pass.
    const changedIds = [...this.changed];
    this.changed.clear();
    // The period's own tick may come a little early of a period since the last: slack.
    const everyMachine = now - this.everyAt >= 0.9 * this.config.reputation.recomputeIntervalMs;
    await this.catchUp(everyMachine);
    const live = (r: MachineRecord) => {
      const last = Math.max(r.transitions.at(-1)?.at ?? 0, r.heartbeats.lastArrival ?? 0, r.measuredNetwork?.testedAt ?? 0);
      return now - last < FORGET_AFTER_MS;
    };
    const records = [...this.records.values()].filter(live);
    const changed = changedIds.flatMap((id) => this.records.get(id) ?? []).filter(live);
    if (everyMachine) this.everyAt = now;
    if (!records.length || (!everyMachine && !changed.length)) return;
    const timer = recomputeSeconds.startTimer();
    const scores = scoreMachines(records, now, this.params, everyMachine ? records : changed);
    for (const s of scores) reputationScore.set({ machine: s.machineId }, s.score);
    const historyEveryMs = this.config.reputation.historyIntervalSeconds * 1000;
    const history: MachineScore[] = [];
    const refresh: MachineScore[] = [];
    for (const s of scores) {
      const prev = this.published.get(s.machineId);
      if (changedMeaningfully(prev, s) || now - (prev?.historyAt ?? 0) >= historyEveryMs) history.push(s);
      else if (now - (prev?.kvAt ?? 0) >= KV_REFRESH_MS) refresh.push(s);
    }
    const computedAt = new Date(now).toISOString();
    await this.reputation.appendScores(history, new Date(now));
    const kv = await this.messaging.kv({ name: REPUTATION_BUCKET.name, ttlMs: REPUTATION_BUCKET_TTL_MS });
    const historic = new Set(history);
    // All at once: the client pipelines them. A machine whose put fails is retried next pass.
    await Promise.all(
      [...history, ...refresh].map(async (s) => {
        const entry: ReputationEntry = { score: s.score, components: s.components, observed: s.observed, standing: s.standing, computedAt };
        await kv.put(s.machineId, JSON.stringify(entry));
        if (historic.has(s))
          await this.messaging.publish(REPUTATION_SCORE, { machineId: s.machineId, ...entry }, { msgId: `${s.machineId}:${computedAt}` });
        const prev = this.published.get(s.machineId);
        this.published.set(s.machineId, {
          score: s.score,
          components: s.components,
          standing: s.standing,
          historyAt: historic.has(s) ? now : (prev?.historyAt ?? 0),
          kvAt: now,
        });
      }),
    );
    timer();
    if (history.length) this.logger.debug({ machines: history.map((s) => `${s.machineId}=${s.score}`) }, 'scores changed');
  }

  /**
   * Brings the copy of the records up to date. On the first pass after taking the lease: every
   * record, and the scores another replica published last (kvAt 0: every entry is put again
   * on this pass, in case the bucket lost it meanwhile). Changed heartbeats only with
   * `heartbeats` (a pass over every machine): every machine beats every period, so reading them
   * on each event's pass read most of the table several times a second (bench/agents README,
   * run Y), for punctuality that moves slowly and that only the full pass scores anyway.
   */
  private async catchUp(heartbeats: boolean): Promise<void> {
    if (!this.readAt) {
      for (const r of await this.reputation.latestScores())
        this.published.set(r.machineId, {
          score: r.score,
          components: r.components,
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
    for (const stored of records) {
      const known = this.records.get(stored.machineId);
      if (stored.record || !known)
        this.records.set(stored.machineId, machineRecordOf(stored.machineId, stored.pool, stored.record, stored.heartbeats));
      else known.heartbeats = machineRecordOf(stored.machineId, stored.pool, undefined, stored.heartbeats).heartbeats;
    }
    if (!this.readAt) this.logger.log(`scoring the records of ${records.length} machine(s)`);
    this.readAt = readAt;
    if (heartbeats || !this.heartbeatsReadAt) this.heartbeatsReadAt = readAt;
  }

  /** Not the lease holder: the copy would go stale; a later lease starts afresh. */
  private forget(): void {
    this.changed.clear();
    this.everyAt = 0;
    if (!this.readAt) return;
    this.records.clear();
    this.published.clear();
    this.readAt = undefined;
    this.heartbeatsReadAt = undefined;
  }
}
