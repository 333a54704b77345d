import { type StreamName } from './contract.js';

/**
 * JetStream streams Tern uses. Every service declares, idempotently at start-up, the streams
 * it uses (`CoreModule.forRoot({ streams })`) with this one config, so no service has to start
 * first. Subjects are written with the `tern` root; the messaging library rewrites it per
 * namespace.
 */
export interface StreamSpec {
  readonly name: StreamName;
  readonly subjects: readonly string[];
  readonly retention: 'limits' | 'workqueue';
  /** Max age in seconds; 0 keeps messages until limits or acks remove them. */
  readonly maxAgeSeconds: number;
  /** Window in which a repeated Nats-Msg-Id is dropped as a duplicate. */
  readonly duplicateWindowSeconds: number;
  readonly description: string;
}

const DAY = 24 * 3600;

export const STREAMS: Record<StreamName, StreamSpec> = {
  EVENTS: {
    name: 'EVENTS',
    subjects: ['tern.machine.>', 'tern.container.>', 'tern.task.>', 'tern.scale.>', 'tern.usage.>', 'tern.reputation.>', 'tern.sandbox.>'],
    retention: 'limits',
    maxAgeSeconds: 30 * DAY,
    duplicateWindowSeconds: 120,
    description:
      'Facts: lifecycle events of machines, containers and tasks, scale decisions, usage and scores. Replayable (metering rebuilds totals from it).',
  },
  COMMANDS: {
    name: 'COMMANDS',
    subjects: ['tern.command.>'],
    retention: 'workqueue',
    maxAgeSeconds: DAY,
    duplicateWindowSeconds: 120,
    description: 'Orders that must survive a restart of their receiver (desired container counts, reschedules).',
  },
  TASKS: {
    name: 'TASKS',
    subjects: ['tern.tasks.>'],
    retention: 'workqueue',
    maxAgeSeconds: 14 * DAY,
    duplicateWindowSeconds: 300,
    description: 'Task-queue payloads, one subject per deployment, pulled by agents for their containers.',
  },
  HEARTBEATS: {
    name: 'HEARTBEATS',
    subjects: ['tern.heartbeat.>'],
    retention: 'limits',
    maxAgeSeconds: 3600,
    duplicateWindowSeconds: 10,
    description: 'Machine heartbeats; kept one hour so reputation can measure punctuality after a restart.',
  },
};
