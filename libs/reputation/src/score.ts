import { punctuality } from './heartbeat.js';
import { latencyComponent, meanLatency, median } from './latency.js';
import { networkComponent } from './network.js';
import { outcomeRate, type OutcomeTotals, outcomeTotals } from './outcomes.js';
import { type ReputationParams, WEIGHTED_COMPONENTS, type WeightedComponent } from './params.js';
import { type MachineRecord } from './record.js';
import { uptime, UPTIME_PERIODS_MS } from './uptime.js';

/**
 * The weighted components plus the three uptimes the uptime component blends. `network` only
 * once the control plane has measured the machine's network: without, it is no part of the score.
 */
export type ScoreComponents = Record<Exclude<WeightedComponent, 'network'> | 'uptime1d' | 'uptime7d' | 'uptime30d', number> &
  Partial<Record<'network', number>>;

/**
 * How much the control plane has seen of a machine's work: `unproven` while fewer than
 * `provenAfter` (decayed) starts and task attempts have ended on it, so its score is mostly the
 * prior's guess; `proven` after. A machine whose record fades (no work for weeks) is unproven again.
 */
export type Standing = 'unproven' | 'proven';

export interface MachineScore {
  readonly machineId: string;
  /** 0..1, rounded to 4 decimals. */
  readonly score: number;
  readonly components: ScoreComponents;
  /** Decayed starts and task attempts the control plane saw end on the machine, rounded to 2 decimals. */
  readonly observed: number;
  readonly standing: Standing;
}

/** The standing of a machine with `observed` outcomes. */
export function standingOf(observed: number, params: ReputationParams): Standing {
  return observed >= params.provenAfter ? 'proven' : 'unproven';
}

const round = (n: number) => Math.round(Math.min(1, Math.max(0, n)) * 10_000) / 10_000;

/**
 * What a machine is judged against, from the whole fleet at one `now`: task and start failures
 * against the same deployment on the other machines, start latency against the median of the
 * machine's pool (each pool's median computed once).
 */
export interface PeerInputs {
  readonly tasks: OutcomeTotals;
  readonly starts: OutcomeTotals;
  readonly poolMedianMs: ReadonlyMap<string, number | null>;
}

export function peerInputs(records: readonly MachineRecord[], now: number, params: ReputationParams): PeerInputs {
  const byPool = new Map<string, number[]>();
  for (const r of records) {
    const l = meanLatency(r.latency, now, params);
    if (!l) continue;
    const key = r.pool ?? '';
    // Pushed, not copied: a copy per machine made each pass quadratic in the pool's size.
    const values = byPool.get(key) ?? [];
    if (!byPool.has(key)) byPool.set(key, values);
    values.push(l.meanMs);
  }
  return {
    tasks: outcomeTotals(
      records.map((r) => r.tasks),
      now,
      params,
    ),
    starts: outcomeTotals(
      records.map((r) => r.starts),
      now,
      params,
    ),
    poolMedianMs: new Map([...byPool].map(([pool, values]) => [pool, median(values)])),
  };
}

/**
 * Scores every machine at `now`. Machines are scored together because two inputs are relative
 * (see PeerInputs); `only` scores those of the records alone, against the same peers: the same
 * scores a pass over every machine gives them.
 *
 *   score = Σ weight × component / Σ weight   (over the components with evidence: network only
 *           once the control plane measured it)
 *   uptime = 0.5 × uptime(1 d) + 0.3 × uptime(7 d) + 0.2 × uptime(30 d)
 */
export function scoreMachines(
  records: readonly MachineRecord[],
  now: number,
  params: ReputationParams,
  only: readonly MachineRecord[] = records,
): MachineScore[] {
  const peers = peerInputs(records, now, params);
  return only.map((r) => scoreMachine(r, peers, now, params));
}

export function scoreMachine(r: MachineRecord, peers: PeerInputs, now: number, params: ReputationParams): MachineScore {
  const [u1, u7, u30] = UPTIME_PERIODS_MS.map((p) => uptime(r.transitions, now, p));
  const [w1, w7, w30] = params.uptimeWeights;
  const task = outcomeRate(r.tasks, peers.tasks, now, params);
  const start = outcomeRate(r.starts, peers.starts, now, params);
  const weighted: Partial<Record<WeightedComponent, number>> = {
    uptime: w1 * u1 + w7 * u7 + w30 * u30,
    taskSuccess: task.rate,
    startSuccess: start.rate,
    startLatency: latencyComponent(meanLatency(r.latency, now, params), peers.poolMedianMs.get(r.pool ?? '') ?? null, params),
    heartbeat: punctuality(r.heartbeats, now, params),
    ...(r.measuredNetwork ? { network: networkComponent(r.measuredNetwork, params) } : {}),
  };
  const counted = WEIGHTED_COMPONENTS.filter((c) => weighted[c] !== undefined);
  const weight = counted.reduce((sum, c) => sum + params.weights[c], 0);
  const score = counted.reduce((sum, c) => sum + params.weights[c] * weighted[c]!, 0) / weight;
  const components = { ...weighted, uptime1d: u1, uptime7d: u7, uptime30d: u30 };
  const observed = Math.round((task.attempts + start.attempts) * 100) / 100;
  return {
    machineId: r.machineId,
    score: round(score),
    components: Object.fromEntries(Object.entries(components).map(([k, v]) => [k, round(v)])) as ScoreComponents,
    observed,
    standing: standingOf(observed, params),
  };
}

/** A score as last published for a machine: what the next one is compared with. */
export interface PublishedScore {
  readonly score: number;
  readonly components: Record<string, number>;
  readonly standing?: Standing;
}

/** How often a machine's score is written down (historyDue). */
export interface HistoryCadence {
  /** A history row at least this often, moved or not (REPUTATION_HISTORY_INTERVAL_SECONDS). */
  readonly everyMs: number;
  /** A small move of the components alone waits until the last row is this old. */
  readonly componentsMs: number;
}

/** A component moving by this many `minDelta`s is written at once, whatever the score did. */
const LARGE_COMPONENT_MOVE = 5;

/**
 * Whether a new score gets a history row now (with it the KV entry the scheduler reads and a
 * REPUTATION_SCORE event). At once when it is the first, when the score moved by `minDelta`,
 * the standing changed (what placement reads) or a component moved by five times that; when
 * only a component moved by twice `minDelta`, once the last row is `componentsMs` old; and every
 * `everyMs` anyway. A young machine's punctuality climbs from the prior in steps of 0.01–0.03
 * with each of its first beats while its score moves by a tenth of that: without the wait every
 * machine of a fleet that just joined got a row, a KV put and an event every few passes
 * (bench/agents README: 20,000 rows in a 30 s window of 10,000 agents).
 */
export function historyDue(
  prev: (PublishedScore & { readonly historyAt: number }) | undefined,
  next: MachineScore,
  now: number,
  cadence: HistoryCadence,
  minDelta = 0.005,
): boolean {
  if (!prev) return true;
  const age = now - prev.historyAt;
  if (age >= cadence.everyMs || scoreMoved(prev, next, minDelta) || componentsMoved(prev, next, LARGE_COMPONENT_MOVE * minDelta))
    return true;
  return age >= cadence.componentsMs && componentsMoved(prev, next, 2 * minDelta);
}

function scoreMoved(prev: PublishedScore, next: MachineScore, minDelta: number): boolean {
  return Math.abs(prev.score - next.score) >= minDelta || (prev.standing !== undefined && prev.standing !== next.standing);
}

function componentsMoved(prev: PublishedScore, next: MachineScore, delta: number): boolean {
  for (const [k, v] of Object.entries(next.components)) if (Math.abs((prev.components[k] ?? -1) - v) >= delta) return true;
  return false;
}
