import type { MapResultLine, MapStarted, MapView } from '../../../libs/contracts/src/index.js';
import { routeOf, queryOf } from './calls.js';
import { TernApiError, TernRemoteError } from './errors.js';
import { type Input, ndjsonLines, type TernHttp } from './http.js';

/** How long a reader waits before asking again for the lines it has not had. */
const RECONNECT_MS = 1_000;

export interface MapOptions {
  version?: number;
  /** Inputs per task (the handler is called once per input in the container); default 1. */
  chunk_size?: number;
  /** Keep a failed input's error in its place instead of failing the map. */
  return_exceptions?: boolean;
  /** `input` (default): results in input order; `completion`: as chunks finish. */
  order?: 'input' | 'completion';
  max_retries?: number;
  timeout?: number;
}

/** Inputs of a map: JSON values (sent as NDJSON while they are read) or NDJSON bytes as they are. */
export type MapInputs = Iterable<Input> | AsyncIterable<Input> | ReadableStream<Uint8Array>;

/** Objects as a stream of NDJSON lines, read only as fast as the gateway takes them. */
function ndjsonStream(inputs: Iterable<Input> | AsyncIterable<Input>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const source = (inputs as AsyncIterable<Input>)[Symbol.asyncIterator]?.() ?? (inputs as Iterable<Input>)[Symbol.iterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await source.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(`${JSON.stringify(next.value)}\n`));
    },
  });
}

/** Server-side maps: POST /function/<name>/map, GET /api/v1/maps/<id>[/results]. */
export class Maps {
  constructor(private readonly http: TernHttp) {}

  /** Streams the inputs up (never whole in memory); answers once the gateway has durably accepted every one. */
  async start(name: string, inputs: MapInputs, options: MapOptions = {}): Promise<MapStarted> {
    const { version, ...query } = options;
    const body = inputs instanceof ReadableStream ? inputs : ndjsonStream(inputs);
    const response = await this.http.stream('POST', `${routeOf('function', name, version)}/map${queryOf({ ...query })}`, body, {
      contentType: 'application/x-ndjson',
    });
    return (await response.json()) as MapStarted;
  }

  async get(mapId: string): Promise<MapView> {
    return (await this.http.get<MapView>(`/api/v1/maps/${encodeURIComponent(mapId)}`)).body;
  }

  async cancel(mapId: string): Promise<MapView> {
    return (await this.http.request<MapView>('DELETE', `/api/v1/maps/${encodeURIComponent(mapId)}`)).body;
  }

  /**
   * Every result line of the map, once each, in the map's order: a dropped connection is asked
   * again from the lines had so far; a 4xx (the map is not there) ends it with the gateway's word.
   */
  async *results(mapId: string, total: number, from = 0): AsyncGenerator<MapResultLine> {
    let received = from;
    while (received < total) {
      try {
        const response = await this.http.stream('GET', `/api/v1/maps/${encodeURIComponent(mapId)}/results?from=${received}`);
        for await (const line of ndjsonLines<MapResultLine>(response)) {
          received++;
          yield line;
        }
      } catch (e) {
        if (e instanceof TernApiError && e.status >= 400 && e.status < 500) throw e;
      }
      if (received < total) await new Promise((r) => setTimeout(r, RECONNECT_MS));
    }
  }

  /**
   * Maps `name` over `inputs` and yields each input's result in order as it arrives. A failed
   * input is a TernRemoteError, or with `return_exceptions` yielded in its place as one;
   * `onProgress` hears (done, total) after each result.
   */
  async *map<T = unknown>(
    name: string,
    inputs: MapInputs,
    options: MapOptions & { onProgress?: (done: number, total: number) => void } = {},
  ): AsyncGenerator<T | TernRemoteError> {
    const { onProgress, ...rest } = options;
    const started = await this.start(name, inputs, rest);
    let done = 0;
    for await (const line of this.results(started.map_id, started.total)) {
      onProgress?.(++done, started.total);
      if (line.status === 'ok') {
        yield line.result as T;
        continue;
      }
      const error = new TernRemoteError(
        `input ${line.index} ${line.status}: ${line.error ?? 'no error recorded'}`,
        `${started.map_id}#${line.index}`,
      );
      if (!rest.return_exceptions) throw error;
      yield error;
    }
  }
}
