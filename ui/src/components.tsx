import { type ReactNode, useState } from 'react';
import { BarElement, CategoryScale, Chart as ChartJS, Filler, LinearScale, LineElement, PointElement, Tooltip } from 'chart.js';
import { Bar, Line } from 'react-chartjs-2';
import { ApiError } from './api.js';
import { type Polled } from './poll.js';

ChartJS.register(CategoryScale, LinearScale, PointElement, LineElement, BarElement, Filler, Tooltip);

export function Card({ title, children, testId }: { title: string; children: ReactNode; testId?: string }) {
  return (
    <section className="card" data-testid={testId}>
      <h2>{title}</h2>
      {children}
    </section>
  );
}

/** A figure with its label; `testId` lets the browser test compare it with the API's answer. */
export function Figure({ label, value, testId }: { label: string; value: ReactNode; testId?: string }) {
  return (
    <div className="figure">
      <span className="figure-value" data-testid={testId}>
        {value}
      </span>
      <span className="figure-label">{label}</span>
    </div>
  );
}

export function Badge({ value }: { value: string }) {
  return <span className={`badge badge-${value.toLowerCase()}`}>{value}</span>;
}

/** Loading, failure (403 says the token may not see this) or the page once its data is in. */
export function Loaded<T>({ polled, children }: { polled: Polled<T>; children: (data: T) => ReactNode }) {
  if (polled.error && polled.data === undefined) {
    const forbidden = polled.error instanceof ApiError && polled.error.status === 403;
    return (
      <p className="error" role="alert">
        {forbidden ? `Not available to this token: ${polled.error.message}` : polled.error.message}
      </p>
    );
  }
  if (polled.data === undefined) return <p className="muted">Loading…</p>;
  return (
    <div data-loaded={polled.loadedAt} className="loaded">
      {children(polled.data)}
    </div>
  );
}

export interface Column<T> {
  title: string;
  cell: (row: T) => ReactNode;
}

export function Table<T>({
  rows,
  columns,
  rowKey,
  testId,
}: {
  rows: T[];
  columns: Column<T>[];
  rowKey: (row: T) => string;
  testId?: string;
}) {
  if (!rows.length) return <p className="muted">None.</p>;
  return (
    <div className="table-scroll">
      <table data-testid={testId}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.title}>{c.title}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)} data-key={rowKey(row)}>
              {columns.map((c) => (
                <td key={c.title} data-label={c.title}>
                  {c.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function ago(iso: string | null | undefined): string {
  if (!iso) return '—';
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export const time = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : '—');

export const round = (n: number, digits = 1): string => n.toLocaleString(undefined, { maximumFractionDigits: digits });

/** Colours for series without a tone, in order; a series with a tone takes its own. */
const PALETTE = ['#2563eb', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#475569', '#a16207'];

/** What a series means to its reader: good news is green, bad news red, wherever it is drawn. */
export const TONES = { good: '#16a34a', bad: '#dc2626' } as const;

export interface Series {
  label: string;
  /** null: no value there (a gap in a line). */
  values: (number | null)[];
  tone?: keyof typeof TONES;
}

/** Each series' colour: its tone's, or the next of the palette among those without one. */
function colours(series: Series[]): string[] {
  let next = 0;
  return series.map((s) => (s.tone ? TONES[s.tone] : PALETTE[next++ % PALETTE.length]!));
}

const chartOptions = {
  responsive: true,
  maintainAspectRatio: false,
  animation: false as const,
  // The legend is the chart's own HTML (ChartLegend): readable, and its colours checkable.
  plugins: { legend: { display: false } },
};

/** A chart with its legend below it; a click on a legend entry hides or shows that series. */
function ChartFrame({ series, testId, children }: { series: Series[]; testId?: string; children: (hidden: Set<string>) => ReactNode }) {
  const [hidden, setHidden] = useState(() => new Set<string>());
  const toggle = (label: string) =>
    setHidden((h) => {
      const next = new Set(h);
      if (!next.delete(label)) next.add(label);
      return next;
    });
  const colour = colours(series);
  return (
    <figure className="chart-frame" data-testid={testId}>
      <div className="chart">{children(hidden)}</div>
      <ul className="legend">
        {series.map((s, i) => (
          <li key={s.label} className={hidden.has(s.label) ? 'hidden' : undefined}>
            <button type="button" onClick={() => toggle(s.label)} aria-pressed={!hidden.has(s.label)}>
              <span className="swatch" style={{ backgroundColor: colour[i] }} />
              {s.label}
            </button>
          </li>
        ))}
      </ul>
    </figure>
  );
}

export function LineChart({ labels, series, stepped, testId }: { labels: string[]; series: Series[]; stepped?: boolean; testId?: string }) {
  const colour = colours(series);
  return (
    <ChartFrame series={series} testId={testId}>
      {(hidden) => (
        <Line
          options={chartOptions}
          data={{
            labels,
            datasets: series.map((s, i) => ({
              label: s.label,
              data: s.values,
              hidden: hidden.has(s.label),
              borderColor: colour[i],
              backgroundColor: colour[i],
              pointRadius: 2,
              tension: stepped ? 0 : 0.2,
              // A count holds its value until the next change.
              stepped: stepped ? ('after' as const) : false,
            })),
          }}
        />
      )}
    </ChartFrame>
  );
}

export function BarChart({ labels, series, stacked, testId }: { labels: string[]; series: Series[]; stacked?: boolean; testId?: string }) {
  const colour = colours(series);
  return (
    <ChartFrame series={series} testId={testId}>
      {(hidden) => (
        <Bar
          options={{ ...chartOptions, scales: { x: { stacked }, y: { stacked } } }}
          data={{
            labels,
            datasets: series.map((s, i) => ({ label: s.label, data: s.values, hidden: hidden.has(s.label), backgroundColor: colour[i] })),
          }}
        />
      )}
    </ChartFrame>
  );
}
