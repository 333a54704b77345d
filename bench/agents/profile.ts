/**
 * bench/agents --profile-dir: where each step's time goes. nats-server's own profiler (a pprof CPU
 * profile over the step's window, and `go tool pprof -top` of it where Go is installed),
 * its /varz, /subsz and /connz summaries and /jsz (streams, without consumers: a consumer's info
 * on a filtered consumer costs nats-server 2.9 a scan of the stream's blocks), and Postgres's
 * pg_stat_statements where the server preloads it (a private instance: `--database`).
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type pg from 'pg';

const run = promisify(execFile);

export interface NatsMonitor {
  /** The server's name in file names: `nats`, or `nats1`, `nats2`... in a cluster. */
  name: string;
  httpPort: number;
  profPort: number;
  binary: string;
}

async function get(url: string): Promise<Buffer> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}

/** Profiles nats-server for `seconds` (call it as the window opens); writes step-<agents>-*.{pb,txt,json} into dir and returns the pprof top. */
export async function profileNats(dir: string, agents: number, monitor: NatsMonitor, seconds: number): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const base = join(dir, `step-${agents}`);
  const name = monitor.name;
  const cpu = await get(`http://127.0.0.1:${monitor.profPort}/debug/pprof/profile?seconds=${Math.floor(seconds)}`);
  await writeFile(`${base}-${name}-cpu.pb`, cpu);
  const http = `http://127.0.0.1:${monitor.httpPort}`;
  for (const [what, path] of [
    ['varz', '/varz'],
    ['subsz', '/subsz'],
    ['connz', '/connz?limit=1&sort=msgs_from'],
    ['jsz', '/jsz?streams=true'],
  ])
    await writeFile(`${base}-${name}-${what}.json`, await get(http + path).catch((e: Error) => Buffer.from(e.message)));
  const top = await run('go', ['tool', 'pprof', '-top', '-nodecount=25', monitor.binary, `${base}-${name}-cpu.pb`]).then(
    (r) => r.stdout,
    (e: Error) => `go tool pprof not available (${e.message.split('\n')[0]}): the profile is ${base}-nats-cpu.pb`,
  );
  await writeFile(`${base}-${name}-top.txt`, top);
  return top
    .split('\n')
    .filter((l) => /^\s+[\d.]+m?s/.test(l))
    .slice(0, 10);
}

/** Empties pg_stat_statements of the bench's database; false where the server does not preload it. */
export async function resetStatements(db: pg.Client): Promise<boolean> {
  try {
    await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await db.query('SELECT pg_stat_statements_reset()');
    return true;
  } catch {
    return false;
  }
}

/** The statements of the bench's database by total execution time since the reset; written to dir. */
export async function topStatements(db: pg.Client, dir: string, agents: number): Promise<string[]> {
  const { rows } = await db.query<{ calls: string; total_ms: number; mean_ms: number; rows: string; query: string }>(
    `SELECT calls, total_exec_time AS total_ms, mean_exec_time AS mean_ms, rows, query FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT 12`,
  );
  const lines = rows.map(
    (r) =>
      `${r.total_ms.toFixed(0).padStart(8)} ms ${String(r.calls).padStart(7)} calls ${r.mean_ms.toFixed(2).padStart(7)} ms/call ${String(r.rows).padStart(8)} rows  ${r.query.replace(/\s+/g, ' ').slice(0, 160)}`,
  );
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, `step-${agents}-pg-statements.txt`), lines.join('\n') + '\n');
  return lines;
}
