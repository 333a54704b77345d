import { Counter } from 'prom-client';

/**
 * Counters of what metering has processed and accrued. The resource-seconds counters grow as
 * checkpoints and stops add usage; a correction downwards (an end earlier than a checkpoint
 * already reached) is not subtracted, as counters only rise: Postgres holds the exact figures.
 */
export const meteringEventsTotal = new Counter({
  name: 'tern_metering_events_total',
  help: 'Lifecycle events metering has applied, by subject kind',
  labelNames: ['kind'] as const,
});

export const meteringCheckpointsTotal = new Counter({
  name: 'tern_metering_checkpoints_total',
  help: 'Checkpoints that accrued running containers up to now',
});

export const meteringIntervalsWrittenTotal = new Counter({
  name: 'tern_metering_intervals_written_total',
  help: 'Usage interval rows written (inserted or grown), by checkpoint or close',
  labelNames: ['by'] as const,
});

export const meteringGpuSecondsTotal = new Counter({
  name: 'tern_metering_gpu_seconds_total',
  help: 'GPU-seconds accrued',
});

export const meteringCpuCoreSecondsTotal = new Counter({
  name: 'tern_metering_cpu_core_seconds_total',
  help: 'CPU-core-seconds accrued',
});

export const meteringMemoryGibSecondsTotal = new Counter({
  name: 'tern_metering_memory_gib_seconds_total',
  help: 'Memory GiB-seconds accrued',
});

export const meteringTasksTotal = new Counter({
  name: 'tern_metering_tasks_total',
  help: 'Task attempts metered, by outcome',
  labelNames: ['outcome'] as const,
});

export const meteringEventsRefusedTotal = new Counter({
  name: 'tern_metering_events_refused_total',
  help: 'Container events not metered: for a container the scheduler never placed, or from another machine than it was placed on, by reason',
  labelNames: ['reason'] as const,
});
