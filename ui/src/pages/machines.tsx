import {
  get,
  type MachineDetail,
  type MachineReputation,
  type MachineStateChanges,
  type MachineSummary,
  type UsageReport,
} from '../api.js';
import { ago, Badge, Card, Figure, LineChart, Loaded, round, Table, time } from '../components.js';
import { usePoll } from '../poll.js';
import { href } from '../route.js';

const gpus = (m: MachineSummary) => (m.gpus.length ? `${m.gpus.length} × ${m.gpus[0].model}` : 'none');
/** An unproven machine's score is mostly the prior's guess: say so beside it. */
const score = (m: MachineSummary) =>
  m.reputation ? `${round(m.reputation.score, 3)}${m.reputation.standing === 'unproven' ? ' (unproven)' : ''}` : '—';

export function MachinesPage() {
  const polled = usePoll((signal) => get<MachineSummary[]>('/api/v1/machines', signal), []);
  return (
    <>
      <h1>Machines</h1>
      <Loaded polled={polled}>
        {(machines) => (
          <Table
            testId="machines"
            rows={machines}
            rowKey={(m) => m.id}
            columns={[
              { title: 'machine', cell: (m) => <a href={href('machines', m.id)}>{m.id}</a> },
              { title: 'state', cell: (m) => <Badge value={m.state} /> },
              { title: 'pool', cell: (m) => m.pool },
              { title: 'GPUs', cell: gpus },
              { title: 'reputation', cell: score },
              { title: 'last heartbeat', cell: (m) => ago(m.lastHeartbeatAt) },
              { title: 'containers', cell: (m) => m.runningContainers ?? '—' },
            ]}
          />
        )}
      </Loaded>
    </>
  );
}

interface MachineData {
  machine: MachineDetail;
  reputation: MachineReputation;
  states: MachineStateChanges;
  /** null: this token may not read per-machine usage (operator only). */
  usage: UsageReport | null;
}

export function MachinePage({ id, operator }: { id: string; operator: boolean }) {
  const polled = usePoll<MachineData>(
    async (signal) => {
      const path = encodeURIComponent(id);
      const from = new Date(Date.now() - 24 * 3600_000).toISOString();
      const [machine, reputation, states, usage] = await Promise.all([
        get<MachineDetail>(`/api/v1/machines/${path}`, signal),
        get<MachineReputation>(`/api/v1/machines/${path}/reputation?limit=200`, signal),
        get<MachineStateChanges>(`/api/v1/machines/${path}/state-changes?limit=50`, signal),
        operator
          ? get<UsageReport>(`/api/v1/usage?group_by=machine&granularity=hour&from=${encodeURIComponent(from)}`, signal)
          : Promise.resolve(null),
      ]);
      return { machine, reputation, states, usage };
    },
    [id, operator],
  );
  return (
    <>
      <h1>
        <a href={href('machines')}>Machines</a> / {id}
      </h1>
      <Loaded polled={polled}>{(data) => <MachineView {...data} />}</Loaded>
    </>
  );
}

function MachineView({ machine: m, reputation, states, usage }: MachineData) {
  const history = [...reputation.history].reverse();
  const components = Object.keys(reputation.components ?? {});
  const usageRows = usage?.rows.filter((r) => r.group === m.id) ?? [];
  return (
    <div className="grid">
      <Card title="State" testId="machine-state">
        <p>
          <Badge value={m.state} /> since {time(m.stateChangedAt)} {m.stateReason && <span className="muted">({m.stateReason})</span>}
        </p>
        <p className="muted">
          Registered {time(m.registeredAt)} · last heartbeat {ago(m.lastHeartbeatAt)} · agent {m.agentVersion ?? '—'}
        </p>
      </Card>
      <Card title="State changes" testId="state-changes">
        <Table
          testId="state-change-table"
          rows={states.changes}
          rowKey={(c) => `${c.at}-${c.to}`}
          columns={[
            { title: 'at', cell: (c) => time(c.at) },
            { title: 'from', cell: (c) => c.from ?? '—' },
            { title: 'to', cell: (c) => <Badge value={c.to} /> },
            { title: 'why', cell: (c) => c.reason ?? '' },
          ]}
        />
      </Card>
      <Card title="Inventory" testId="inventory">
        <dl>
          <dt>Host</dt>
          <dd>{m.hostname ?? '—'}</dd>
          <dt>Pool</dt>
          <dd>{m.pool}</dd>
          <dt>OS</dt>
          <dd>{m.os ? `${m.os.distro} ${m.os.release} (${m.os.kernel}, ${m.os.arch})` : '—'}</dd>
          <dt>CPU</dt>
          <dd>
            {m.cpu.model ?? '—'} · {m.cpu.cores ?? '?'} cores / {m.cpu.threads ?? '?'} threads ·{' '}
            {m.cpu.usagePercent === null ? '—' : `${round(m.cpu.usagePercent)} %`}
          </dd>
          <dt>Memory</dt>
          <dd>
            {m.memory.totalBytes ? `${round(m.memory.totalBytes / 2 ** 30)} GiB` : '—'} ·{' '}
            {m.memory.usagePercent === null ? '—' : `${round(m.memory.usagePercent)} %`}
          </dd>
          <dt>GPUs</dt>
          <dd data-testid="gpu-count">{m.gpus.length}</dd>
        </dl>
        <Table
          rows={m.gpus}
          rowKey={(g) => String(g.index)}
          columns={[
            { title: '#', cell: (g) => g.index },
            { title: 'model', cell: (g) => g.model },
            { title: 'memory', cell: (g) => `${g.memoryMiB} MiB` },
            { title: 'state', cell: (g) => g.state ?? '—' },
          ]}
        />
        <Table
          rows={m.disks}
          rowKey={(d) => d.mount}
          columns={[
            { title: 'disk', cell: (d) => d.mount },
            { title: 'size', cell: (d) => `${round(d.sizeBytes / 2 ** 30)} GiB` },
            { title: 'free', cell: (d) => `${round(d.freeBytes / 2 ** 30)} GiB` },
          ]}
        />
      </Card>
      <Card title="Network test" testId="network">
        {m.network ? (
          <div className="figures">
            <Figure label="Mbit/s (slower leg)" value={round(m.network.throughputMbps)} testId="throughput" />
            <Figure label="Mbit/s NATS" value={round(m.network.natsMbps)} />
            <Figure label="Mbit/s HTTP" value={round(m.network.httpMbps)} />
            <Figure label="ms latency" value={round(m.network.latencyMs, 2)} />
            <p className="muted">
              Tested {time(m.network.testedAt)} {m.network.error && <span className="error">{m.network.error}</span>}
            </p>
          </div>
        ) : (
          <p className="muted">Not tested yet.</p>
        )}
      </Card>
      <Card title="Reputation" testId="reputation">
        <div className="figures">
          <Figure label="score" value={reputation.score === null ? '—' : round(reputation.score, 3)} testId="score" />
          <Figure
            label={`standing (${Math.round(reputation.observed ?? 0)} starts and tasks observed)`}
            value={reputation.standing ?? '—'}
            testId="standing"
          />
          {components.map((c) => (
            <Figure key={c} label={c} value={round(reputation.components?.[c] ?? 0, 3)} />
          ))}
        </div>
        {history.length > 0 && (
          <LineChart
            testId="reputation-chart"
            labels={history.map((h) => new Date(h.computedAt).toLocaleTimeString())}
            series={[
              { label: 'score', values: history.map((h) => h.score) },
              ...components.map((c) => ({ label: c, values: history.map((h) => h.components[c] ?? 0) })),
            ]}
          />
        )}
      </Card>
      <Card title="Running containers" testId="containers">
        {m.heartbeat ? (
          <>
            <p className="muted">
              Heartbeat #{m.heartbeat.sequence} at {time(m.heartbeat.receivedAt)}
            </p>
            <ul data-testid="running-containers">
              {m.heartbeat.runningContainers.map((c) => (
                <li key={c}>
                  <code>{c}</code>
                </li>
              ))}
            </ul>
          </>
        ) : (
          <p className="muted">No recent heartbeat.</p>
        )}
      </Card>
      <Card title="Usage, last 24 h" testId="machine-usage">
        {usage === null ? (
          <p className="muted">Per-machine usage and rewards are for the operator.</p>
        ) : (
          <>
            <div className="figures">
              <Figure label="GPU-seconds" value={round(usageRows.reduce((n, r) => n + r.gpuSeconds, 0))} testId="machine-gpu-seconds" />
              <Figure label="container-seconds" value={round(usageRows.reduce((n, r) => n + r.containerSeconds, 0))} />
              <Figure label="tasks completed" value={usageRows.reduce((n, r) => n + r.tasksCompleted, 0)} />
            </div>
            {usageRows.length > 0 && (
              <LineChart
                labels={usageRows.map((r) => new Date(r.periodStart).toLocaleTimeString())}
                series={[
                  { label: 'CPU core-seconds', values: usageRows.map((r) => r.cpuCoreSeconds) },
                  { label: 'GPU-seconds', values: usageRows.map((r) => r.gpuSeconds) },
                ]}
              />
            )}
          </>
        )}
      </Card>
    </div>
  );
}
