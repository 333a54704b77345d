import { useState } from 'react';
import { get, TASK_STATES, type DeploymentSummary, type TaskList, type TaskView } from '../api.js';
import { Badge, Card, Loaded, Table, time } from '../components.js';
import { usePoll } from '../poll.js';
import { href } from '../route.js';

const PAGE = 100;

export function TasksPage() {
  const [queue, setQueue] = useState('');
  const [state, setState] = useState('');
  const queues = usePoll((signal) => get<DeploymentSummary[]>('/api/v1/deployments', signal), []);
  const query = new URLSearchParams({ limit: String(PAGE), ...(queue ? { deployment: queue } : {}), ...(state ? { status: state } : {}) });
  const polled = usePoll((signal) => get<TaskList>(`/api/v1/tasks?${query.toString()}`, signal), [query.toString()]);
  return (
    <>
      <h1>Tasks</h1>
      <div className="filters">
        <label>
          Queue
          <select name="queue" value={queue} onChange={(e) => setQueue(e.target.value)}>
            <option value="">all</option>
            {(queues.data ?? [])
              .filter((d) => d.kind === 'task_queue')
              .map((d) => (
                <option key={d.name}>{d.name}</option>
              ))}
          </select>
        </label>
        <label>
          State
          <select name="state" value={state} onChange={(e) => setState(e.target.value)}>
            <option value="">all</option>
            {TASK_STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      </div>
      <Loaded polled={polled}>
        {(list) => (
          <>
            <Table
              testId="tasks"
              rows={list.tasks}
              rowKey={(t) => t.task_id}
              columns={[
                { title: 'task', cell: (t) => <a href={href('tasks', t.task_id)}>{t.task_id.slice(0, 8)}</a> },
                { title: 'queue', cell: (t) => t.deployment },
                { title: 'state', cell: (t) => <Badge value={t.status} /> },
                { title: 'attempts', cell: (t) => t.attempts },
                { title: 'created', cell: (t) => time(t.created_at) },
                { title: 'ended', cell: (t) => time(t.ended_at) },
              ]}
            />
            {list.next_cursor && <p className="muted">Newest {PAGE} shown; narrow the filter to see others.</p>}
          </>
        )}
      </Loaded>
    </>
  );
}

export function TaskPage({ id }: { id: string }) {
  const polled = usePoll((signal) => get<TaskView>(`/api/v1/tasks/${encodeURIComponent(id)}`, signal), [id]);
  return (
    <>
      <h1>
        <a href={href('tasks')}>Tasks</a> / {id}
      </h1>
      <Loaded polled={polled}>
        {(t) => (
          <div className="grid">
            <Card title="Task" testId="task">
              <dl>
                <dt>State</dt>
                <dd data-testid="task-status">
                  <Badge value={t.status} />
                </dd>
                <dt>Queue</dt>
                <dd>
                  <a href={href('deployments', t.deployment)}>{t.deployment}</a> v{t.version}
                </dd>
                <dt>Attempts</dt>
                <dd data-testid="task-attempts">
                  {t.attempts} (retries allowed: {t.max_retries})
                </dd>
                <dt>Created</dt>
                <dd>{time(t.created_at)}</dd>
                <dt>Started</dt>
                <dd>{time(t.started_at)}</dd>
                <dt>Ended</dt>
                <dd>{time(t.ended_at)}</dd>
                <dt>Machine</dt>
                <dd>{t.machine_id ? <a href={href('machines', t.machine_id)}>{t.machine_id}</a> : '—'}</dd>
                <dt>Container</dt>
                <dd>{t.container_id ?? '—'}</dd>
              </dl>
            </Card>
            <Card title={t.error ? 'Error' : 'Result'} testId="outcome">
              <pre data-testid="task-outcome">{t.error ?? (t.result === undefined ? '—' : JSON.stringify(t.result, null, 2))}</pre>
            </Card>
          </div>
        )}
      </Loaded>
    </>
  );
}
