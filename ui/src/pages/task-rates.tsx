import { get, type TaskStats } from '../api.js';
import { Card, Figure, LineChart, Loaded, round } from '../components.js';
import { usePoll } from '../poll.js';

const seconds = (s: number | null) => (s === null ? '—' : `${round(s, 2)} s`);

/** Tasks per second and failures over the last hour (one deployment's when named), from GET /api/v1/tasks/stats. */
export function TaskRates({ deployment }: { deployment?: string }) {
  const query = deployment ? `?deployment=${encodeURIComponent(deployment)}` : '';
  const polled = usePoll((signal) => get<TaskStats>(`/api/v1/tasks/stats${query}`, signal), [query]);
  return (
    <Card title="Tasks, last hour" testId="task-rates">
      <Loaded polled={polled}>
        {(stats) => {
          const ended = stats.series.reduce((n, p) => n + p.completed + p.failed, 0);
          const failed = stats.series.reduce((n, p) => n + p.failed, 0);
          return (
            <>
              <div className="figures">
                <Figure label="tasks ended" value={ended} testId="tasks-ended" />
                <Figure label="failed" value={failed} testId="tasks-failed" />
                {(['p50', 'p95', 'p99'] as const).map((p) => (
                  <Figure key={p} label={`${p} run time`} value={seconds(stats.durationSeconds[p])} testId={`duration-${p}`} />
                ))}
                {Object.entries(stats.states).map(([state, n]) => (
                  <Figure key={state} label={state.toLowerCase()} value={n} testId={`tasks-${state}`} />
                ))}
              </div>
              <LineChart
                testId="task-rate-chart"
                labels={stats.series.map((p) => new Date(p.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }))}
                series={[
                  { label: 'submitted / s', values: stats.series.map((p) => Number(round(p.submitted / stats.stepSeconds, 3))) },
                  {
                    label: 'completed / s',
                    tone: 'good',
                    values: stats.series.map((p) => Number(round(p.completed / stats.stepSeconds, 3))),
                  },
                  { label: 'failed / s', tone: 'bad', values: stats.series.map((p) => Number(round(p.failed / stats.stepSeconds, 3))) },
                ]}
              />
            </>
          );
        }}
      </Loaded>
    </Card>
  );
}
