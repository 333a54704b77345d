import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { REPUTATION_BUCKET, REPUTATION_BUCKET_TTL_MS, REPUTATION_SCORE, type ReputationEntry } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { ReputationRepository } from '#tern/persistence';
import { changedMeaningfully, DAY_MS, type MachineScore, type ReputationParams, scoreMachines } from '#tern/reputation';
import { MachineBook } from './machine-book.js';
import { recomputeSeconds, reputationScore } from './metrics.js';
import { REPUTATION_PARAMS } from './reputation-params.js';
import { Ticker } from '#tern/timing';

/** After an event, scores are recomputed this soon (events in a burst share one pass). */
const AFTER_EVENT_MS = 200;
/** The KV entry of an unchanged score is put again this often, well inside the bucket's TTL. */
const KV_REFRESH_MS = 10 * 60_000;
/** A machine with no event for this long (the longest uptime period) is no longer scored. */
const FORGET_AFTER_MS = 30 * DAY_MS;

interface Published {
  score: number;
  components: Record<string, number>;
  historyAt: number;
  kvAt: number;
}

/**
 * Recomputes every machine's score on a timer and soon after events. A score that moved
 * meaningfully (or whose last history row is REPUTATION_HISTORY_INTERVAL_SECONDS old) gets a
 * history row in reputation_scores, a REPUTATION_SCORE event and a fresh entry in the
 * `reputation` KV bucket, which the scheduler reads.
 */
@Injectable()
export class Scorer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('scorer');
  private readonly published = new Map<string, Published>();
  private ticker?: Ticker;
  private soon?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly book: MachineBook,
    private readonly reputation: ReputationRepository,
    private readonly messaging: Messaging,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
    @Inject(REPUTATION_PARAMS) private readonly params: ReputationParams,
  ) {}

  async onApplicationBootstrap() {
    const last = await this.reputation.latestScores();
    // kvAt 0: every entry is put again on the first pass, in case the bucket lost it meanwhile.
    for (const r of last)
      this.published.set(r.machineId, { score: r.score, components: r.components, historyAt: r.computedAt.getTime(), kvAt: 0 });
    const everyMs = this.config.reputation.recomputeIntervalMs;
    this.ticker = new Ticker({ name: 'recomputing scores', everyMs, logger: this.logger, immediate: true }, () => this.recompute()).start();
  }

  async onApplicationShutdown() {
    this.stopped = true;
    clearTimeout(this.soon);
    await this.ticker?.stop();
  }

  /** Asks for a pass shortly (an event changed a record). */
  nudge() {
    if (this.soon || this.stopped) return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      this.ticker?.poke();
    }, AFTER_EVENT_MS);
  }

  /** One pass over every machine. */
  private async recompute(now = Date.now()): Promise<void> {
    const records = this.book.all().filter((r) => {
      const last = Math.max(r.transitions.at(-1)?.at ?? 0, r.heartbeats.lastArrival ?? 0, r.network?.testedAt ?? 0);
      return now - last < FORGET_AFTER_MS;
    });
    if (!records.length) return;
    const timer = recomputeSeconds.startTimer();
    const scores = scoreMachines(records, now, this.params);
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
        const entry: ReputationEntry = { score: s.score, components: s.components, computedAt };
        await kv.put(s.machineId, JSON.stringify(entry));
        if (historic.has(s))
          await this.messaging.publish(REPUTATION_SCORE, { machineId: s.machineId, ...entry }, { msgId: `${s.machineId}:${computedAt}` });
        const prev = this.published.get(s.machineId);
        this.published.set(s.machineId, {
          score: s.score,
          components: s.components,
          historyAt: historic.has(s) ? now : (prev?.historyAt ?? 0),
          kvAt: now,
        });
      }),
    );
    timer();
    if (history.length) this.logger.debug({ machines: history.map((s) => `${s.machineId}=${s.score}`) }, 'scores changed');
  }
}
