/**
 * Rewards for a period. Each machine's weight is the GPU-seconds it served in the period times
 * its reputation score (0..1); its share is its weight over the sum of all weights:
 *
 *   weight(m) = gpuSeconds(m) × score(m)
 *   share(m)  = weight(m) / Σ weight          (0 for every machine when Σ weight = 0)
 *   reward(m) = share(m) × amount             (when an amount to distribute is given)
 *
 * A machine with no score yet counts as NEUTRAL_SCORE (1.0): a new machine is paid in full for
 * the work it did until reputation has evidence against it.
 */
export const NEUTRAL_SCORE = 1;

export interface MachineService {
  readonly machineId: string;
  readonly gpuSeconds: number;
  /** Latest reputation score; null when the machine has none. */
  readonly score: number | null;
}

export interface MachineReward {
  readonly machineId: string;
  readonly gpuSeconds: number;
  /** The score used: the machine's own, clamped to [0, 1], or NEUTRAL_SCORE. */
  readonly score: number;
  readonly weight: number;
  readonly share: number;
  /** share × amount; absent without an amount. */
  readonly reward?: number;
}

export function computeRewards(machines: readonly MachineService[], amount?: number): MachineReward[] {
  if (amount !== undefined && !(Number.isFinite(amount) && amount >= 0)) throw new RangeError(`amount must be a number ≥ 0, got ${amount}`);
  const weighted = machines.map((m) => {
    const score = m.score === null || !Number.isFinite(m.score) ? NEUTRAL_SCORE : Math.min(1, Math.max(0, m.score));
    const gpuSeconds = Math.max(0, m.gpuSeconds);
    return { machineId: m.machineId, gpuSeconds, score, weight: gpuSeconds * score };
  });
  const total = weighted.reduce((sum, m) => sum + m.weight, 0);
  return weighted
    .map((m) => {
      const share = total > 0 ? m.weight / total : 0;
      return { ...m, share, ...(amount !== undefined ? { reward: share * amount } : {}) };
    })
    .sort((a, b) => b.share - a.share || a.machineId.localeCompare(b.machineId));
}
