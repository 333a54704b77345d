import { BadRequestException } from '@nestjs/common';
import { usageCsv } from './usage-csv.js';
import { usageWindow } from './usage-window.js';

describe('usageWindow', () => {
  const now = new Date('2026-03-01T12:00:00Z');

  it('defaults to the 24 h before now, or before the given end', () => {
    expect(usageWindow({}, now)).toEqual({ from: new Date('2026-02-28T12:00:00Z'), to: now });
    expect(usageWindow({ to: '2026-01-10' }, now)).toEqual({
      from: new Date('2026-01-09T00:00:00Z'),
      to: new Date('2026-01-10T00:00:00Z'),
    });
  });

  it('refuses an empty or inverted window, or one over 366 days, naming the parameters', () => {
    expect(() => usageWindow({ from: '2026-01-02', to: '2026-01-02' }, now)).toThrow(BadRequestException);
    expect(() => usageWindow({ from: '2026-01-03', to: '2026-01-02' }, now)).toThrow(/from \(2026-01-03T00:00:00.000Z\) must be before to/);
    expect(() => usageWindow({ from: '2024-01-01', to: '2026-01-01' }, now)).toThrow(/from and to must be at most 366 days apart/);
  });
});

describe('usageCsv', () => {
  it('writes one header and one line per row, quoting what needs it', () => {
    const csv = usageCsv([
      {
        group: 'd-1',
        name: 'say "hi", world',
        periodStart: '2026-01-01T00:00:00.000Z',
        periodEnd: '2026-01-01T01:00:00.000Z',
        gpuSeconds: 3600,
        cpuCoreSeconds: 7200,
        memoryGibSeconds: 14400,
        containerSeconds: 3600,
        tasksCompleted: 3,
        tasksFailed: 1,
        taskSeconds: 12.5,
      },
    ]);
    expect(csv.split('\r\n')).toEqual([
      'group,name,period_start,period_end,gpu_seconds,cpu_core_seconds,memory_gib_seconds,container_seconds,tasks_completed,tasks_failed,task_seconds',
      'd-1,"say ""hi"", world",2026-01-01T00:00:00.000Z,2026-01-01T01:00:00.000Z,3600,7200,14400,3600,3,1,12.5',
      '',
    ]);
  });
});
