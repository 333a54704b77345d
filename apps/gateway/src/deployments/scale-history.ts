import type { ScaleHistory } from '#tern/contracts';
import type { ScaleStep } from '#tern/persistence';

/**
 * Folds DeploymentsRepository.scaleHistory into the answer: desired summed over versions (each
 * version's latest count), containers ready counted up and down, one point per change.
 */
export function scaleHistory(
  deployment: string,
  window: { from: Date; to: Date },
  history: { steps: ScaleStep[]; desiredAtStart: number; readyAtStart: number },
): ScaleHistory {
  const desiredOf = new Map<number, number>();
  let desired = history.desiredAtStart;
  let ready = history.readyAtStart;
  const series: ScaleHistory['series'] = [{ at: window.from.toISOString(), desired, ready }];
  const events: ScaleHistory['events'] = [];
  for (const step of history.steps) {
    const at = new Date(step.at).toISOString();
    if (step.kind === 'desired') {
      desired += step.value - (desiredOf.get(step.version) ?? step.previous ?? 0);
      desiredOf.set(step.version, step.value);
      events.push({ at, version: step.version, desired: step.value, previous: step.previous ?? 0, reason: step.reason });
    } else {
      ready += step.kind === 'up' ? 1 : -1;
    }
    series.push({ at, desired, ready });
  }
  series.push({ at: window.to.toISOString(), desired, ready });
  return { deployment, from: window.from.toISOString(), to: window.to.toISOString(), events, series };
}
