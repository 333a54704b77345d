import { Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Subscription } from '@nats-io/transport-node';
import { TASK_ENDED, type TaskEnded } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import type { TaskWithDeployment } from '#tern/persistence';

/** How often a waiter re-reads its task anyway, in case the notice was missed. */
export const WAIT_RECHECK_MS = 2_000;

/**
 * Callers waiting for a task to end, woken by TASK_ENDED notices from whichever replica
 * recorded the end. A waiter never trusts the notice alone: it re-reads the row, unless this
 * replica recorded the end itself and hands over the row its write answered.
 *
 * The gateway's one reader of TASK_ENDED: whoever else in this process acts on a task's end
 * (the map settler) hears it through `onEnded`. The ends this replica records are told here
 * in-process (`announce`), and their echo from NATS is dropped unread: each task's end costs
 * this process no read and no validation, however many parts of it listen.
 */
@Injectable()
export class TaskWaiters implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly waiting = new Map<string, Set<(ended?: TaskWithDeployment) => void>>();
  private readonly listeners: ((taskId: string) => void)[] = [];
  private subscription?: Subscription;

  constructor(private readonly messaging: Messaging) {}

  onApplicationBootstrap() {
    this.subscription = this.messaging.listen(TASK_ENDED, (ended) => this.ended(ended.taskId), [], { othersOnly: true });
  }

  /** Calls `listener` with the id of every task whose end this replica records or hears of. */
  onEnded(listener: (taskId: string) => void): void {
    this.listeners.push(listener);
  }

  /**
   * Tells every gateway replica (this one in-process) and the workspace's integrators that a
   * task ended (core NATS, the workspace id a token; a lost notice is caught by the re-reads).
   */
  announce(ended: TaskEnded): void {
    this.messaging.emit(TASK_ENDED, ended, [ended.workspaceId], { markOrigin: true });
    this.ended(ended.taskId);
  }

  private ended(taskId: string): void {
    this.wake(taskId);
    for (const listener of this.listeners) listener(taskId);
  }

  onApplicationShutdown() {
    this.subscription?.unsubscribe();
  }

  /**
   * Wakes whoever waits on `key` now (a map's readers when one of its chunks settled on this
   * replica), handing over the task as this replica just wrote it when it has it.
   */
  wake(key: string, ended?: TaskWithDeployment) {
    for (const wake of this.waiting.get(key) ?? []) wake(ended);
  }

  /**
   * Resolves when the task's end is announced, or after at most `ms`: with the ended task when
   * this replica recorded the end, else with nothing (the caller re-reads).
   */
  next(taskId: string, ms: number): Promise<TaskWithDeployment | undefined> {
    return new Promise((resolve) => {
      let set = this.waiting.get(taskId);
      if (!set) this.waiting.set(taskId, (set = new Set()));
      const wake = (ended?: TaskWithDeployment) => {
        clearTimeout(timer);
        set!.delete(wake);
        if (!set!.size) this.waiting.delete(taskId);
        resolve(ended);
      };
      const timer = setTimeout(wake, Math.max(0, Math.min(ms, WAIT_RECHECK_MS)));
      set.add(wake);
    });
  }
}
