import { get, type DeploymentSummary, type MachineSummary, type SystemHealth } from '../api.js';
import { ago, Badge, Card, Figure, Loaded, round, Table } from '../components.js';
import { usePoll } from '../poll.js';
import { TaskRates } from './task-rates.js';

interface OverviewData {
  health: SystemHealth;
  machines: MachineSummary[];
  deployments: DeploymentSummary[];
}

function countBy<T>(rows: T[], key: (row: T) => string): [string, number][] {
  const counts = new Map<string, number>();
  for (const row of rows) counts.set(key(row), (counts.get(key(row)) ?? 0) + 1);
  return [...counts].sort(([a], [b]) => a.localeCompare(b));
}

/** What the cluster offers and what is in use now: GPUs from heartbeats' busy flags, CPU from their usage. */
export function capacity(machines: MachineSummary[]) {
  const live = machines.filter((m) => m.state === 'ready' || m.state === 'unschedulable');
  const gpus = live.flatMap((m) => m.gpus);
  const threads = live.reduce((n, m) => n + (m.cpu.threads ?? m.cpu.cores ?? 0), 0);
  const cpuInUse = live.reduce((n, m) => n + ((m.cpu.usagePercent ?? 0) / 100) * (m.cpu.threads ?? m.cpu.cores ?? 0), 0);
  return { gpusOffered: gpus.length, gpusInUse: gpus.filter((g) => g.state === 'busy').length, threads, cpuInUse };
}

export function OverviewPage() {
  const polled = usePoll<OverviewData>(async (signal) => {
    const [health, machines, deployments] = await Promise.all([
      get<SystemHealth>('/api/v1/system', signal),
      get<MachineSummary[]>('/api/v1/machines', signal),
      get<DeploymentSummary[]>('/api/v1/deployments', signal),
    ]);
    return { health, machines, deployments };
  }, []);
  return (
    <>
      <h1>Overview</h1>
      <Loaded polled={polled}>
        {({ health, machines, deployments }) => {
          const cap = capacity(machines);
          return (
            <div className="grid">
              <Card title="Services" testId="services">
                <p>
                  System <Badge value={health.status} />
                </p>
                <Table
                  rows={Object.entries(health.services).flatMap(([role, s]) =>
                    s.instances.length
                      ? s.instances.map((i) => ({ role, status: s.status, ...i }))
                      : [{ role, status: s.status, id: `${role}-down`, version: '—', startedAt: undefined, host: undefined }],
                  )}
                  rowKey={(r) => r.id}
                  columns={[
                    { title: 'service', cell: (r) => r.role },
                    { title: 'status', cell: (r) => <Badge value={r.status} /> },
                    { title: 'instance', cell: (r) => r.host ?? r.id },
                    { title: 'version', cell: (r) => r.version },
                    { title: 'up since', cell: (r) => ago(r.startedAt) },
                  ]}
                />
                <p className="muted">{health.agents.length} agents connected</p>
              </Card>
              <Card title="Machines by state" testId="machines-by-state">
                <div className="figures">
                  <Figure label="machines" value={machines.length} testId="machines-total" />
                  {countBy(machines, (m) => m.state).map(([state, n]) => (
                    <Figure key={state} label={state} value={n} testId={`machines-${state}`} />
                  ))}
                </div>
              </Card>
              <Card title="Deployments by state" testId="deployments-by-state">
                <div className="figures">
                  <Figure label="deployments" value={deployments.length} testId="deployments-total" />
                  {countBy(deployments, (d) => d.state).map(([state, n]) => (
                    <Figure key={state} label={state} value={n} testId={`deployments-${state}`} />
                  ))}
                  <Figure label="containers running" value={deployments.reduce((n, d) => n + d.actual, 0)} testId="containers-actual" />
                </div>
              </Card>
              <Card title="Cluster capacity" testId="capacity">
                <div className="figures">
                  <Figure label="GPUs in use / offered" value={`${cap.gpusInUse} / ${cap.gpusOffered}`} testId="gpus" />
                  <Figure label="CPU threads in use / offered" value={`${round(cap.cpuInUse)} / ${cap.threads}`} testId="cpus" />
                </div>
              </Card>
              <TaskRates />
            </div>
          );
        }}
      </Loaded>
    </>
  );
}
