/**
 * A running mean that leans toward recent samples: the first sample as it is, then each one
 * moving the mean `weight` of the way toward it.
 */
export function smoothed(mean: number | undefined, sample: number, weight: number): number {
  return mean === undefined ? sample : mean + weight * (sample - mean);
}
