import { Command } from 'commander';
import type { SystemHealth } from '#tern/contracts';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { table } from '../table.js';

function age(iso?: string): string {
  if (!iso) return '-';
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
}

export function renderStatus(h: SystemHealth): string {
  const rows = Object.entries(h.services).map(([name, s]) => [
    name,
    s.status === 'up' ? 'up' : 'DOWN',
    String(s.instances.length),
    s.instances
      .map((i) => i.version)
      .filter((v, i, a) => a.indexOf(v) === i)
      .join(',') || '-',
    age(s.instances[0]?.startedAt),
  ]);
  rows.push(['agents', h.agents.length ? 'up' : 'none', String(h.agents.length), h.agents[0]?.version ?? '-', '-']);
  const out = [table(['SERVICE', 'STATE', 'INSTANCES', 'VERSION', 'UPTIME'], rows)];
  if (h.agents.length) {
    out.push(
      '',
      table(
        ['MACHINE', 'POOL', 'HOST'],
        h.agents.map((a) => [a.machineId ?? a.id, a.pool ?? '-', a.host ?? '-']),
      ),
    );
  }
  out.push('', h.status === 'ok' ? 'All services are up.' : 'Some services are down: see their logs (.tern/logs/ under npm run up).');
  return out.join('\n');
}

export function statusCommand(): Command {
  return new Command('status')
    .description('Show every Tern service and the connected agents')
    .option('--json', 'print the raw JSON')
    .action(async (opts: { json?: boolean }) => {
      const client = new ApiClient(resolveContext());
      const { body } = await client.get<SystemHealth>('/health/ready', [503]);
      if (opts.json) console.log(JSON.stringify(body, null, 2));
      else console.log(renderStatus(body));
      if (body.status !== 'ok') process.exitCode = 1;
    });
}
