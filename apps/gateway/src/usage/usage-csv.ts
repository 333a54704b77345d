import { type MachineReward } from '#tern/metering';
import { type UsageReportRow } from '#tern/persistence';

/** RFC 4180: quote a field holding a comma, quote or line break, doubling inner quotes. */
function field(value: string | number | null | undefined): string {
  const text = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

function lines(header: string[], rows: (string | number | null | undefined)[][]): string {
  return [header, ...rows].map((r) => r.map(field).join(',')).join('\r\n') + '\r\n';
}

export function usageCsv(rows: readonly UsageReportRow[]): string {
  return lines(
    [
      'group',
      'name',
      'period_start',
      'period_end',
      'gpu_seconds',
      'cpu_core_seconds',
      'memory_gib_seconds',
      'container_seconds',
      'tasks_completed',
      'tasks_failed',
      'task_seconds',
    ],
    rows.map((r) => [
      r.group,
      r.name,
      r.periodStart,
      r.periodEnd,
      r.gpuSeconds,
      r.cpuCoreSeconds,
      r.memoryGibSeconds,
      r.containerSeconds,
      r.tasksCompleted,
      r.tasksFailed,
      r.taskSeconds,
    ]),
  );
}

export function rewardsCsv(machines: readonly MachineReward[]): string {
  return lines(
    ['machine', 'gpu_seconds', 'score', 'weight', 'share', 'reward'],
    machines.map((m) => [m.machineId, m.gpuSeconds, m.score, m.weight, m.share, m.reward]),
  );
}
