import { freeGpus, freeResources } from './resources.js';
import { DEFAULT_PLACEMENT_OPTIONS, type MachineView, type PlacementOptions } from './types.js';

/**
 * Whether a machine offers placement something it did not before: it is new to the pool or became
 * ready, its verification changed (a tier it now meets), or it has more free CPU, more free memory
 * or a GPU free that was taken. A version that found no room is worth trying again only then; a
 * machine that is not ready or is quarantined offers nothing, whatever it frees. Any one resource
 * growing counts, even when another shrank: a wasted try costs one placement, a missed one a back-off.
 */
export function roomGrew(
  before: MachineView | undefined,
  after: MachineView,
  options: PlacementOptions = DEFAULT_PLACEMENT_OPTIONS,
): boolean {
  if (after.state !== 'ready' || after.verification === 'quarantined') return false;
  if (!before || before.state !== 'ready' || before.verification !== after.verification) return true;
  const was = freeResources(before, options);
  const now = freeResources(after, options);
  if (now.cpuMillicores > was.cpuMillicores || now.memoryBytes > was.memoryBytes) return true;
  const freeBefore = new Set(freeGpus(before).map((g) => `${g.index}:${g.model}`));
  return freeGpus(after).some((g) => !freeBefore.has(`${g.index}:${g.model}`));
}
