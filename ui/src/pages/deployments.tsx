import { useEffect, useState } from 'react';
import { follow, get, type DeploymentDetail, type DeploymentSummary, type RequestHistory, type ScaleHistory } from '../api.js';
import { Badge, Card, Figure, LineChart, Loaded, round, Table, time } from '../components.js';
import { usePoll } from '../poll.js';
import { href } from '../route.js';
import { TaskRates } from './task-rates.js';

export function DeploymentsPage() {
  const polled = usePoll((signal) => get<DeploymentSummary[]>('/api/v1/deployments', signal), []);
  return (
    <>
      <h1>Deployments</h1>
      <Loaded polled={polled}>
        {(deployments) => (
          <Table
            testId="deployments"
            rows={deployments}
            rowKey={(d) => d.name}
            columns={[
              { title: 'deployment', cell: (d) => <a href={href('deployments', d.name)}>{d.name}</a> },
              { title: 'kind', cell: (d) => d.kind },
              { title: 'version', cell: (d) => `v${d.version}` },
              { title: 'state', cell: (d) => <Badge value={d.state} /> },
              { title: 'desired / actual', cell: (d) => <span data-testid="desired-actual">{`${d.desired} / ${d.actual}`}</span> },
              { title: 'reason when short', cell: (d) => (d.actual < d.desired ? (d.reason ?? '') : '') },
              { title: 'updated', cell: (d) => time(d.updatedAt) },
            ]}
          />
        )}
      </Loaded>
    </>
  );
}

export function DeploymentPage({ name }: { name: string }) {
  const polled = usePoll((signal) => get<DeploymentDetail>(`/api/v1/deployments/${encodeURIComponent(name)}`, signal), [name]);
  return (
    <>
      <h1>
        <a href={href('deployments')}>Deployments</a> / {name}
      </h1>
      <Loaded polled={polled}>
        {(d) => (
          <div className="grid">
            <Card title="Versions" testId="versions">
              <p>
                <Badge value={d.state} /> {d.kind} · <code>{d.url}</code>
              </p>
              <Table
                rows={d.versions}
                rowKey={(v) => String(v.version)}
                columns={[
                  { title: 'version', cell: (v) => `v${v.version}${v.latest ? ' (latest)' : ''}` },
                  { title: 'desired / actual', cell: (v) => `${v.desired} / ${v.actual}` },
                  { title: 'why', cell: (v) => v.placementReason ?? v.crashLoop?.state ?? v.desiredReason ?? '' },
                  { title: 'created', cell: (v) => time(v.createdAt) },
                ]}
              />
            </Card>
            <Card title="Containers" testId="containers">
              <Table
                testId="container-table"
                rows={d.containers}
                rowKey={(c) => c.id}
                columns={[
                  { title: 'container', cell: (c) => <code>{c.id}</code> },
                  { title: 'version', cell: (c) => `v${c.version}` },
                  { title: 'state', cell: (c) => <Badge value={c.state} /> },
                  { title: 'machine', cell: (c) => (c.machineId ? <a href={href('machines', c.machineId)}>{c.machineId}</a> : '—') },
                  { title: 'ready', cell: (c) => time(c.readyAt) },
                ]}
              />
            </Card>
            <ScaleEvents name={name} />
            {d.kind === 'task_queue' ? <TaskRates deployment={name} /> : <Requests name={name} />}
            <Logs name={name} />
          </div>
        )}
      </Loaded>
    </>
  );
}

const clock = (iso: string) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });

/** Desired vs ready containers over the last hour, and the autoscaler's decisions with their reasons. */
function ScaleEvents({ name }: { name: string }) {
  const polled = usePoll((signal) => get<ScaleHistory>(`/api/v1/deployments/${encodeURIComponent(name)}/scale-events`, signal), [name]);
  return (
    <Card title="Scaling, last hour" testId="scaling">
      <Loaded polled={polled}>
        {(h) => (
          <>
            <LineChart
              testId="scale-chart"
              stepped
              labels={h.series.map((p) => clock(p.at))}
              series={[
                { label: 'desired', values: h.series.map((p) => p.desired) },
                { label: 'ready', values: h.series.map((p) => p.ready) },
              ]}
            />
            <Table
              testId="scale-events"
              rows={[...h.events].reverse()}
              rowKey={(e) => `${e.at}-${e.version}`}
              columns={[
                { title: 'at', cell: (e) => clock(e.at) },
                { title: 'version', cell: (e) => `v${e.version}` },
                { title: 'desired', cell: (e) => `${e.previous} → ${e.desired}` },
                { title: 'why', cell: (e) => e.reason ?? '' },
              ]}
            />
          </>
        )}
      </Loaded>
    </Card>
  );
}

const ms = (s: number | null) => (s === null ? '—' : `${round(s * 1000)} ms`);

/** Endpoint requests over the last hour: rate, errors and latency percentiles per minute. */
function Requests({ name }: { name: string }) {
  const polled = usePoll((signal) => get<RequestHistory>(`/api/v1/deployments/${encodeURIComponent(name)}/requests`, signal), [name]);
  return (
    <Card title="Requests, last hour" testId="requests">
      <Loaded polled={polled}>
        {(h) => {
          const last = [...h.series].reverse().find((p) => p.requests > 0);
          const labels = h.series.map((p) => clock(p.at));
          return (
            <>
              <div className="figures">
                <Figure label="requests" value={h.series.reduce((n, p) => n + p.requests, 0)} testId="requests-total" />
                <Figure label="5xx" value={h.series.reduce((n, p) => n + p.errors, 0)} testId="requests-errors" />
                <Figure label="p50 (last busy minute)" value={ms(last?.p50 ?? null)} testId="requests-p50" />
                <Figure label="p95" value={ms(last?.p95 ?? null)} />
                <Figure label="p99" value={ms(last?.p99 ?? null)} />
              </div>
              <LineChart
                testId="request-rate-chart"
                labels={labels}
                series={[
                  { label: 'requests / s', values: h.series.map((p) => p.requests / 60) },
                  { label: '5xx / s', tone: 'bad', values: h.series.map((p) => p.errors / 60) },
                ]}
              />
              <LineChart
                testId="latency-chart"
                labels={labels}
                series={(['p50', 'p95', 'p99'] as const).map((q) => ({
                  label: `${q} ms`,
                  values: h.series.map((p) => (p[q] === null ? null : p[q] * 1000)),
                }))}
              />
            </>
          );
        }}
      </Loaded>
    </Card>
  );
}

interface LogLine {
  containerId: string;
  stream: string;
  line: string;
  sequence: number;
  at: string;
}

const KEEP_LINES = 500;

/** Follows the deployment's live log lines (GET …/logs?follow=true) while the page is open. */
function Logs({ name }: { name: string }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const [status, setStatus] = useState('connecting');
  useEffect(() => {
    const aborter = new AbortController();
    follow(
      `/api/v1/deployments/${encodeURIComponent(name)}/logs?follow=true`,
      (event, data) => {
        if (event === 'info') setStatus('following');
        else if (event === 'line') setLines((ls) => [...ls, JSON.parse(data) as LogLine].slice(-KEEP_LINES));
      },
      aborter.signal,
    ).then(
      () => setStatus('ended'),
      (e: unknown) => {
        if (!aborter.signal.aborted) setStatus(`stopped: ${e instanceof Error ? e.message : String(e)}`);
      },
    );
    return () => aborter.abort();
  }, [name]);
  return (
    <Card title="Live logs" testId="logs">
      <p className="muted" data-testid="logs-status">
        {status}
      </p>
      <pre className="logs" data-testid="log-lines">
        {lines.map(
          (l) => `${new Date(l.at).toLocaleTimeString()} ${l.containerId.slice(0, 12)} ${l.stream === 'stderr' ? '!' : ' '} ${l.line}\n`,
        )}
      </pre>
    </Card>
  );
}
