import { Command } from 'commander';
import type { ScheduleView } from '#tern/contracts';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { table } from '../table.js';

export function renderSchedules(schedules: ScheduleView[]): string {
  if (!schedules.length) return 'No schedules.';
  return table(
    ['DEPLOYMENT', 'EXPRESSION', 'TIMEZONE', 'STATUS', 'NEXT RUN', 'LAST RUN', 'LAST STATUS'],
    schedules.map((s) => [
      `${s.deployment} v${s.version}`,
      s.expression,
      s.timezone,
      s.status,
      s.next_run ?? '-',
      s.last_run ?? '-',
      s.last_status ?? '-',
    ]),
  );
}

export function scheduleCommand(): Command {
  const cmd = new Command('schedule').description('Schedules of functions and task queues (the schedule: field of a spec)');
  cmd
    .command('list')
    .description('Every schedule of the workspace: expression, timezone, next run, last run and its status')
    .action(async () => {
      const { body } = await new ApiClient(resolveContext()).get<{ schedules: ScheduleView[] }>('/api/v1/schedules');
      process.stdout.write(`${renderSchedules(body.schedules)}\n`);
    });
  return cmd;
}
