import { MAP_CHUNK_KEY, RUNNER_BUNCHES_CHUNKS, RUNNER_BUNCHES_PLAIN, type TaskItem } from '#tern/contracts';

/**
 * Which tasks a container's runner takes in bunches, from its answers' `x-tern-bunches`: none (a
 * custom server, an endpoint's call), map chunks only (a runner of an earlier release), or map
 * chunks and plain task payloads alike.
 */
export type Bunches = 'none' | 'chunks' | 'plain';

export function bunchesOf(header: string | string[] | undefined): Bunches {
  if (header === RUNNER_BUNCHES_PLAIN) return 'plain';
  return header === RUNNER_BUNCHES_CHUNKS ? 'chunks' : 'none';
}

export function isMapChunk(task: TaskItem): boolean {
  return typeof task.payload === 'object' && task.payload !== null && MAP_CHUNK_KEY in task.payload;
}

/** Whether a runner that takes `bunches` takes this task in one. */
export function bunchable(bunches: Bunches, task: TaskItem): boolean {
  return bunches === 'plain' || (bunches === 'chunks' && isMapChunk(task));
}
