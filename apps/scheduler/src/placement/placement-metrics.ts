import { Counter } from 'prom-client';

const failures = new Counter({
  name: 'tern_placement_failures_total',
  help: 'Containers the scheduler could not place or start, by reason (the binding constraint, or start_failed)',
  labelNames: ['reason'],
});

/** The reasons libs/placement words, as a label with few values (the words name machines and amounts). */
const KINDS: [RegExp, string][] = [
  [/^no ready machine in pool \S+ with /, 'no_matching_gpu'],
  [/^no ready machine/, 'no_ready_machine'],
  [/minimum reputation/, 'reputation'],
  [/^not enough free GPUs/, 'gpus'],
  [/^not enough free CPU/, 'cpu'],
  [/^not enough free memory/, 'memory'],
];

// Every reason at 0 from the start, so rate() and alerts see the series before the first failure.
for (const reason of [...KINDS.map(([, kind]) => kind), 'other', 'start_failed']) failures.inc({ reason }, 0);

export function placementFailureKind(reason: string): string {
  return KINDS.find(([pattern]) => pattern.test(reason))?.[1] ?? 'other';
}

export function countPlacementFailure(reason: string): void {
  failures.inc({ reason: placementFailureKind(reason) });
}

export function countStartFailure(): void {
  failures.inc({ reason: 'start_failed' });
}
