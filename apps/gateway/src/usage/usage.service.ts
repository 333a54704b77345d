import { Injectable } from '@nestjs/common';
import { computeRewards, NEUTRAL_SCORE } from '#tern/metering';
import type { RewardsReport, UsageReport } from '#tern/contracts';
import { UsageRepository } from '#tern/persistence';
import { type UsageGranularity, type UsageGroup } from './dto/usage.query.js';
import { type UsageWindow } from './usage-window.js';

export type { RewardsReport, UsageReport } from '#tern/contracts';

const FORMULA = 'weight(m) = gpuSeconds(m) × score(m); share(m) = weight(m) / Σ weight; reward(m) = share(m) × amount';

/** Answers usage questions from what metering wrote (UsageRepository's reports). */
@Injectable()
export class UsageService {
  constructor(private readonly usageRecords: UsageRepository) {}

  async usage(
    window: UsageWindow,
    groupBy: UsageGroup,
    granularity: UsageGranularity | null,
    workspace: string | null,
  ): Promise<UsageReport> {
    const rows = await this.usageRecords.report({ from: window.from, to: window.to, groupBy, bucket: granularity, workspaceId: workspace });
    const totals = zero();
    for (const r of rows) for (const k of Object.keys(totals) as (keyof typeof totals)[]) totals[k] += r[k];
    return {
      from: window.from.toISOString(),
      to: window.to.toISOString(),
      groupBy,
      granularity,
      workspace,
      rows,
      totals,
    };
  }

  async rewards(window: UsageWindow, amount?: number): Promise<RewardsReport> {
    const served = await this.usageRecords.gpuSecondsByMachine(window.from, window.to);
    const machines = computeRewards(served, amount);
    return {
      from: window.from.toISOString(),
      to: window.to.toISOString(),
      formula: FORMULA,
      neutralScore: NEUTRAL_SCORE,
      totalGpuSeconds: machines.reduce((sum, m) => sum + m.gpuSeconds, 0),
      machines,
    };
  }
}

function zero() {
  return { gpuSeconds: 0, cpuCoreSeconds: 0, memoryGibSeconds: 0, containerSeconds: 0, tasksCompleted: 0, tasksFailed: 0, taskSeconds: 0 };
}
