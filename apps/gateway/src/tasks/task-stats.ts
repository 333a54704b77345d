import type { TaskActivityPoint, TaskStats } from '#tern/contracts';
import type { TaskActivityRow } from '#tern/persistence';

const STEP_SECONDS = 60;

/** The window [from, to) cut into whole steps ending at the step that holds `now`. */
export function statsWindow(now: Date, minutes: number): { from: Date; to: Date; stepSeconds: number } {
  const to = new Date(Math.ceil(now.getTime() / (STEP_SECONDS * 1000)) * STEP_SECONDS * 1000);
  return { from: new Date(to.getTime() - minutes * 60_000), to, stepSeconds: STEP_SECONDS };
}

/** Folds TasksRepository.activity's rows into the answer: every step present (zeros too), failures = ERROR + TIMEOUT. */
export function taskStats(
  rows: TaskActivityRow[],
  window: { from: Date; to: Date; stepSeconds: number },
  deployment: string | undefined,
  durationSeconds: TaskStats['durationSeconds'],
): TaskStats {
  const points = new Map<number, TaskActivityPoint>();
  for (let t = window.from.getTime(); t < window.to.getTime(); t += window.stepSeconds * 1000)
    points.set(t, { at: new Date(t).toISOString(), submitted: 0, completed: 0, failed: 0 });
  const states: TaskStats['states'] = {};
  for (const row of rows) {
    if (row.kind === 'now' && row.state) {
      states[row.state] = row.count;
      continue;
    }
    const point = row.at ? points.get(new Date(row.at).getTime()) : undefined;
    if (!point) continue;
    if (row.kind === 'submitted') point.submitted += row.count;
    else if (row.state === 'COMPLETE') point.completed += row.count;
    else if (row.state === 'ERROR' || row.state === 'TIMEOUT') point.failed += row.count;
  }
  return {
    from: window.from.toISOString(),
    to: window.to.toISOString(),
    stepSeconds: window.stepSeconds,
    deployment: deployment ?? null,
    states,
    series: [...points.values()],
    durationSeconds,
  };
}
