import { Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { JetStreamApiError } from '@nats-io/jetstream';
import type { Subscription } from '@nats-io/transport-node';
import { deploymentKey, STREAMS, TASK_SUBMITTED, taskConsumerName } from '#tern/contracts';
import type { Observation } from '#tern/autoscaling';
import { Messaging } from '#tern/messaging';

type ArrivalListener = (key: string) => void;

/**
 * The backlog of task-queue versions, read from JetStream: a version's durable consumer knows
 * how many tasks are not yet delivered (num_pending) and delivered but not settled
 * (num_ack_pending: running, or waiting out a retry back-off). Together they are the tasks in
 * flight that the queue_depth policy divides by tasks_per_container. Also counts submissions
 * (core NATS, every replica) to wake a version's step at once and to measure arrivals.
 */
@Injectable()
export class TaskBacklog implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly arrivals = new Map<string, number>();
  private readonly listeners = new Set<ArrivalListener>();
  private subscription?: Subscription;

  constructor(private readonly messaging: Messaging) {}

  onApplicationBootstrap() {
    this.subscription = this.messaging.listen(TASK_SUBMITTED, (submitted) => {
      if (submitted.deploymentVersion === undefined) return;
      const key = deploymentKey(submitted.deploymentId, submitted.deploymentVersion);
      this.arrivals.set(key, (this.arrivals.get(key) ?? 0) + 1);
      for (const l of this.listeners) l(key);
    });
  }

  onApplicationShutdown() {
    this.subscription?.unsubscribe();
  }

  onArrival(listener: ArrivalListener) {
    this.listeners.add(listener);
  }

  /** Submissions seen for the version since the previous call. */
  takeArrivals(key: string): number {
    const n = this.arrivals.get(key) ?? 0;
    this.arrivals.delete(key);
    return n;
  }

  /** Tasks of the version not yet settled (waiting, running or between retries); 0 before its first task. */
  async unsettled(deploymentId: string, version: number): Promise<number> {
    const jsm = await this.messaging.jsm();
    try {
      const info = await jsm.consumers.info(this.messaging.ns.stream(STREAMS.TASKS.name), taskConsumerName(deploymentId, version));
      return info.num_pending + info.num_ack_pending;
    } catch (e) {
      if (e instanceof JetStreamApiError && (e.status === 404 || /not found/i.test(e.message))) return 0;
      throw e;
    }
  }
}

/**
 * A task queue's observation: the agents' reports give tasks running per container and their
 * mean duration; the tasks waiting are the unsettled ones not running.
 */
export function withTaskBacklog(o: Observation, unsettled: number): Observation {
  return { ...o, buffered: Math.max(0, unsettled - o.inFlight) };
}
