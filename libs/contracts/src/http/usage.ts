export const USAGE_GROUPS = ['workspace', 'deployment', 'machine', 'gpu'] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];
export const USAGE_GRANULARITIES = ['hour', 'day'] as const;
export type UsageGranularity = (typeof USAGE_GRANULARITIES)[number];

export interface UsageTotals {
  gpuSeconds: number;
  cpuCoreSeconds: number;
  memoryGibSeconds: number;
  /** Seconds containers ran, whatever they held. */
  containerSeconds: number;
  tasksCompleted: number;
  tasksFailed: number;
  /** Sum of the durations of the task attempts that ended in the period. */
  taskSeconds: number;
}

export interface UsageRow extends UsageTotals {
  /** The group's key: a workspace, deployment or machine id, or a GPU type ("none" without GPUs, "any" for GPUs of no stated type). */
  group: string;
  /** Workspace or deployment name, when the group has one. */
  name: string | null;
  periodStart: string;
  periodEnd: string;
}

/** `GET /api/v1/usage` (JSON; `format=csv` answers the rows as CSV). */
export interface UsageReport {
  from: string;
  to: string;
  groupBy: UsageGroup;
  granularity: UsageGranularity | null;
  workspace: string | null;
  rows: UsageRow[];
  totals: UsageTotals;
}

export interface MachineRewardView {
  machineId: string;
  gpuSeconds: number;
  /** The score used: the machine's own, clamped to [0, 1], or the neutral score. */
  score: number;
  weight: number;
  share: number;
  /** share × amount; absent without an amount. */
  reward?: number;
}

/** `GET /api/v1/usage/rewards` (admin; `format=csv` answers the machines as CSV). */
export interface RewardsReport {
  from: string;
  to: string;
  formula: string;
  neutralScore: number;
  totalGpuSeconds: number;
  machines: MachineRewardView[];
}
