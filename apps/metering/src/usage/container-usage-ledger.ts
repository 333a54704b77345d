import { Injectable } from '@nestjs/common';
import { type ContainerResources, USAGE_INTERVAL } from '#tern/contracts';
import { closedSlices, hourFloor, intervalId, type UsageSlice } from '#tern/metering';
import { Messaging } from '#tern/messaging';
import { type MeteredContainerIdentity, type MeteredContainerState, UsageRepository } from '#tern/persistence';
import { allotmentOf, countAccrued, upsertSlices } from './slice-rows.js';

/** What a container is charged as: the scheduler's placement record, not its events' word. */
export interface MeteredFacts {
  identity: MeteredContainerIdentity;
  resources: ContainerResources;
}

/**
 * Applies container lifecycle facts to `metered_containers` and, once a container has both a
 * start and an end, writes its final usage slices. Each method is one transaction that first
 * upserts (and so locks) the container's row, so a checkpoint running at the same time either
 * finishes before or skips the container. The rules are order-free — the earliest start and
 * the earliest end win, the allotment comes from `started` alone — because each event kind
 * arrives on its own consumer and a replay interleaves them differently.
 */
@Injectable()
export class ContainerUsageLedger {
  constructor(
    private readonly usage: UsageRepository,
    private readonly messaging: Messaging,
  ) {}

  async started({ identity, resources }: MeteredFacts, at: Date): Promise<void> {
    await this.usage.transaction(async (tx) => {
      const allotment = {
        cpuMillicores: resources.cpuMillicores,
        memoryBytes: resources.memoryBytes,
        gpuCount: resources.gpuCount,
        gpuType: resources.gpuCount > 0 ? (resources.gpuType ?? null) : null,
      };
      const row = await tx.recordContainerStarted(identity, allotment, at.toISOString());
      if (row.endedAt) await this.close(tx, row);
    });
  }

  /** An end of usage at `endAt` (already adjusted for how the container ended). */
  async ended({ identity }: MeteredFacts, endAt: Date, reason: string): Promise<void> {
    await this.usage.transaction(async (tx) => {
      const row = await tx.recordContainerEnded(identity, endAt.toISOString(), reason);
      if (row.startedAt) await this.close(tx, row);
    });
  }

  /**
   * Replaces whatever checkpoints wrote for the container with its exact slices from start to
   * end. Run on every event that completes or moves the span, so a redelivered event rewrites
   * the same rows and an end earlier than the last checkpoint takes the excess back.
   */
  private async close(tx: UsageRepository, row: MeteredContainerState): Promise<void> {
    const allotment = allotmentOf(row);
    if (!allotment || !row.startedAt || !row.endedAt) return;
    const slices = closedSlices({ startedAt: row.startedAt.getTime(), endedAt: row.endedAt.getTime() });
    const removed = await tx.removeSlicesOf(row.containerId);
    await upsertSlices(
      tx,
      slices.map((slice) => ({ row, allotment, slice })),
      true,
    );
    await tx.markAccruedToEnd(row.containerId);
    const kept = new Set(slices.map((s) => intervalId(row.containerId, s.periodStart)));
    const dropped = removed.filter((r) => !kept.has(r.eventId)).map((r) => hourFloor(r.periodStart.getTime()));
    // Announced before the commit: a failed publish rolls back and the event is redelivered.
    await this.announce(row, [...slices, ...dropped.map((hour) => ({ periodStart: hour, periodEnd: hour, seconds: 0 }))]);
    const before = removed.reduce((sum, r) => sum + r.seconds, 0);
    countAccrued(slices.reduce((sum, s) => sum + s.seconds, 0) - before, allotment);
  }

  private async announce(row: MeteredContainerState, slices: readonly UsageSlice[]): Promise<void> {
    const resources = {
      cpuMillicores: row.cpuMillicores!,
      memoryBytes: Number(row.memoryBytes),
      gpuCount: row.gpuCount!,
      ...(row.gpuType ? { gpuType: row.gpuType } : {}),
    };
    for (const slice of slices) {
      const eventId = intervalId(row.containerId, slice.periodStart);
      const periodEnd = new Date(slice.periodEnd).toISOString();
      await this.messaging.publish(
        USAGE_INTERVAL,
        {
          eventId,
          containerId: row.containerId,
          machineId: row.machineId,
          workspaceId: row.workspaceId,
          deploymentId: row.deploymentId,
          resources,
          periodStart: new Date(slice.periodStart).toISOString(),
          periodEnd,
          seconds: slice.seconds,
        },
        { msgId: `${eventId}@${periodEnd}` },
      );
    }
  }
}
