/** `POST /function/<name>/map`: every input durably accepted. */
export interface MapStarted {
  map_id: string;
  total: number;
  function: string;
  version: number;
  chunk_size: number;
  chunks: number;
}

/** `GET /api/v1/maps/<id>` (also `DELETE`): a map's progress, counted in inputs. */
export interface MapView {
  map_id: string;
  function: string;
  version: number;
  /** accepting (inputs still arriving), running, complete, failed (its first error, unless return_exceptions), cancelled. */
  status: 'accepting' | 'running' | 'complete' | 'failed' | 'cancelled';
  done: boolean;
  total: number;
  chunk_size: number;
  return_exceptions: boolean;
  order: 'input' | 'completion';
  /** Inputs by state: waiting for their chunk to start, in a running chunk, and settled ones by outcome. */
  counts: { pending: number; running: number; succeeded: number; failed: number; cancelled: number };
  error: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  /** Settled inputs per second since the first chunk started. */
  inputs_per_second: number | null;
}

/** One line of `GET /api/v1/maps/<id>/results` (NDJSON). */
export type MapResultLine =
  { index: number; status: 'ok'; result: unknown } | { index: number; status: 'error' | 'cancelled'; error: string };
