import { Counter, Gauge, Histogram } from 'prom-client';

/** The reputation service's series on /metrics, beside the process metrics every service exports. */
export const reputationScore = new Gauge({
  name: 'tern_reputation_score',
  help: 'Current reputation of each scored machine, 0 to 1.',
  labelNames: ['machine'],
});

export const recomputeSeconds = new Histogram({
  name: 'tern_reputation_recompute_seconds',
  help: 'Time to score every machine once and store what changed.',
  buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
});

export const readiesRefused = new Counter({
  name: 'tern_reputation_readies_refused_total',
  help: 'container.ready events not counted, by reason (not-commanded: the scheduler never commanded that machine to start that container).',
  labelNames: ['reason'],
});
