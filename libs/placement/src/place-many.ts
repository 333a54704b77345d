import { place } from './place.js';
import { trustedWith } from './trust.js';
import { freeGpus, freeResources, fullnessAfter, type GpuPick, pickGpus } from './resources.js';
import {
  DEFAULT_PLACEMENT_OPTIONS,
  type MachineView,
  type PlacementOptions,
  type PlacementRequest,
  type PlacementResult,
} from './types.js';

/** One machine as a candidate for one request shape: the fields place() ranks by, best first. */
interface Entry {
  readonly at: number;
  /** The machine's view when the entry was made: an entry whose view was replaced since is stale. */
  readonly view: MachineView;
  readonly gpuRank: number;
  readonly hasGpus: number;
  readonly holds: number;
  readonly fullness: number;
  readonly reputation: number;
  readonly id: string;
}

/** Requests that place() treats alike share one candidate heap. */
interface Shape {
  readonly request: PlacementRequest;
  readonly heap: Heap;
}

/**
 * Places a batch of containers: the same answers, in order, as calling place() for each request
 * in turn with the machines' usage updated after every placement (so two containers of a batch
 * never share a GPU or overbook a machine), at a fraction of the cost. place() scans and sorts
 * every machine per call; here each distinct request shape scans the machines once into a heap
 * ordered as place() ranks, and a placement re-ranks only the machine it changed, in every
 * shape's heap (a fuller machine ranks higher under best fit, so its old entry cannot simply be
 * left to sink: it is dropped as stale when it surfaces). A request that finds no machine gets
 * place()'s own reason, computed over the machines as they stand then.
 *
 * Returns the results and the machines as the batch left them.
 */
export function placeMany(
  requests: readonly PlacementRequest[],
  machines: readonly MachineView[],
  options: PlacementOptions = DEFAULT_PLACEMENT_OPTIONS,
): { results: PlacementResult[]; machines: MachineView[] } {
  const current = [...machines];
  const shapes = new Map<string, Shape>();
  const shapeOf = (request: PlacementRequest): Shape => {
    const key = shapeKey(request);
    let shape = shapes.get(key);
    if (!shape) {
      // Every fitting machine at once, then heapified in linear time (pushing one by one costs n log n).
      const entries: Entry[] = [];
      current.forEach((view, at) => {
        const entry = entryIfFits(request, view, at, options);
        if (entry) entries.push(entry);
      });
      shape = { request, heap: new Heap(ranksBefore, entries) };
      shapes.set(key, shape);
    }
    return shape;
  };

  const results = requests.map((request): PlacementResult => {
    const shape = shapeOf(request);
    const best = popFresh(shape.heap, current);
    if (!best) return place(request, current, options);
    const gpus = pickGpus(freeGpus(best.view), request)!;
    const view = withContainer(best.view, request, gpus.indexes);
    current[best.at] = view;
    for (const other of shapes.values()) pushIfFits(other, view, best.at, options);
    return { machineId: view.id, gpuIndexes: gpus.indexes, ...(gpus.type ? { gpuType: gpus.type } : {}) };
  });
  return { results, machines: current };
}

/** Two requests with this key get the same filters and ranking from place(). */
function shapeKey(r: PlacementRequest): string {
  return JSON.stringify([
    r.pool,
    r.cpuMillicores,
    r.memoryBytes,
    r.gpuCount,
    r.gpuTypes,
    r.minReputation ?? null,
    r.image ?? null,
    !!r.verified,
  ]);
}

/** place()'s filters for one machine, without the reasons: the GPUs it would give when the request fits it now. */
function fits(request: PlacementRequest, m: MachineView, options: PlacementOptions): GpuPick | undefined {
  if (m.state !== 'ready' || m.pool !== request.pool || !trustedWith(request, m)) return undefined;
  if (request.minReputation !== undefined && m.reputation !== undefined && m.reputation < request.minReputation) return undefined;
  const free = freeResources(m, options);
  if (free.cpuMillicores < request.cpuMillicores || free.memoryBytes < request.memoryBytes) return undefined;
  return pickGpus(request.gpuCount > 0 ? freeGpus(m) : [], request);
}

function pushIfFits(shape: Shape, view: MachineView, at: number, options: PlacementOptions): void {
  const entry = entryIfFits(shape.request, view, at, options);
  if (entry) shape.heap.push(entry);
}

/** The machine as a candidate for `request`, when it fits now. */
function entryIfFits(request: PlacementRequest, view: MachineView, at: number, options: PlacementOptions): Entry | undefined {
  const gpus = fits(request, view, options);
  if (!gpus) return undefined;
  return {
    at,
    view,
    gpuRank: gpus.rank,
    hasGpus: request.gpuCount === 0 ? Number(view.capacity.gpus.length > 0) : 0,
    holds: Number(Boolean(view.holdsImage)),
    fullness: fullnessAfter(view, request, options),
    reputation: view.reputation ?? 0,
    id: view.id,
  };
}

/** The best entry still describing its machine as it is; stale entries are dropped on the way. */
function popFresh(heap: Heap, current: readonly MachineView[]): Entry | undefined {
  for (let e = heap.pop(); e; e = heap.pop()) if (current[e.at] === e.view) return e;
  return undefined;
}

/** place()'s ranking (see compare in place.ts): whether a goes before b. */
function ranksBefore(a: Entry, b: Entry): boolean {
  if (a.gpuRank !== b.gpuRank) return a.gpuRank < b.gpuRank;
  if (a.hasGpus !== b.hasGpus) return a.hasGpus < b.hasGpus;
  if (a.holds !== b.holds) return a.holds > b.holds;
  if (a.fullness !== b.fullness) return a.fullness > b.fullness;
  if (a.reputation !== b.reputation) return a.reputation > b.reputation;
  return a.id < b.id;
}

/** The machine with one more container of `request` on it. */
export function withContainer(m: MachineView, request: PlacementRequest, gpuIndexes: readonly number[]): MachineView {
  return {
    ...m,
    used: {
      cpuMillicores: m.used.cpuMillicores + request.cpuMillicores,
      memoryBytes: m.used.memoryBytes + request.memoryBytes,
      gpuIndexes: [...m.used.gpuIndexes, ...gpuIndexes].sort((x, y) => x - y),
    },
  };
}

/** A binary min-heap under `before`. */
class Heap {
  constructor(
    private readonly before: (a: Entry, b: Entry) => boolean,
    private readonly items: Entry[] = [],
  ) {
    for (let i = (items.length >> 1) - 1; i >= 0; i--) this.siftDown(i);
  }

  push(e: Entry): void {
    const items = this.items;
    items.push(e);
    for (let i = items.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!this.before(items[i], items[parent])) break;
      [items[i], items[parent]] = [items[parent], items[i]];
      i = parent;
    }
  }

  pop(): Entry | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length && last) {
      items[0] = last;
      this.siftDown(0);
    }
    return top;
  }

  private siftDown(from: number): void {
    const items = this.items;
    for (let i = from; ;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let best = i;
      if (l < items.length && this.before(items[l], items[best])) best = l;
      if (r < items.length && this.before(items[r], items[best])) best = r;
      if (best === i) break;
      [items[i], items[best]] = [items[best], items[i]];
      i = best;
    }
  }
}
