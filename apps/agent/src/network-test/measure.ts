import { type NetworkPathResult } from '#tern/contracts';

/**
 * The arithmetic of the join-time network test, apart from the transports so it can be
 * checked with made-up clocks. Throughput counts bytes that crossed the link in either
 * direction over the time the transfers took (round trips included, as a request pays them).
 */
export function throughputMbps(bytes: number, ms: number): number {
  if (bytes <= 0 || ms <= 0) return 0;
  return (bytes * 8) / (ms / 1000) / 1e6;
}

export function median(values: number[]): number {
  if (!values.length) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const round2 = (n: number) => Math.round(n * 100) / 100;

export function pathResult(bytes: number, transferMs: number, latencies: number[]): NetworkPathResult {
  return { throughputMbps: round2(throughputMbps(bytes, transferMs)), latencyMs: round2(median(latencies)) };
}

export function failedPath(error: string): NetworkPathResult {
  return { throughputMbps: 0, latencyMs: 0, error };
}

/**
 * The filler for one transfer: printable (it travels inside JSON over NATS) and random, so no
 * compression on the way flatters the result.
 */
export function filler(bytes: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const block = Array.from({ length: 4096 }, () => alphabet[Math.floor(Math.random() * 64)]).join('');
  return block.repeat(Math.ceil(bytes / block.length)).slice(0, bytes);
}

/**
 * Largest echo filler that fits the server's max_payload with room for the JSON around it
 * (and the reply headers), never above the wanted size.
 */
export function echoChunkBytes(maxPayload: number | undefined, wanted = 1_000_000): number {
  const limit = (maxPayload ?? 1_048_576) - 4096;
  return Math.max(1024, Math.min(wanted, limit));
}

export interface NetworkVerdict {
  ok: boolean;
  /** Why the pool would not take this machine; the scheduler decides, the agent shows it. */
  reason?: string;
  /** The slower leg's throughput, what the pool minimum is compared with. */
  throughputMbps: number;
}

/** The same rule as the scheduler's admission: the slower leg counts, a failed leg fails. */
export function networkVerdict(nats: NetworkPathResult, http: NetworkPathResult, minNetworkMbps?: number): NetworkVerdict {
  const [path, slower] = http.throughputMbps < nats.throughputMbps ? (['http', http] as const) : (['nats', nats] as const);
  if (!minNetworkMbps) return { ok: true, throughputMbps: slower.throughputMbps };
  if (slower.error)
    return {
      ok: false,
      throughputMbps: 0,
      reason: `network test over ${path} failed (${slower.error}); the pool needs ${minNetworkMbps} Mbps`,
    };
  if (slower.throughputMbps < minNetworkMbps) {
    return {
      ok: false,
      throughputMbps: slower.throughputMbps,
      reason: `network ${Math.round(slower.throughputMbps)} Mbps (${path}) is below the pool's minimum of ${minNetworkMbps} Mbps`,
    };
  }
  return { ok: true, throughputMbps: slower.throughputMbps };
}

export type Clock = () => number;

export interface NatsLegOptions {
  /** One echo round trip: send `data`, ask for `replyBytes` back; resolves with what came back. */
  echo(data: string, replyBytes: number): Promise<{ receivedBytes: number; data: string }>;
  chunkBytes: number;
  /** Transfers up and down, each chunkBytes (8 × 1 MB: 4 up, 4 down). */
  transfers?: number;
  latencyProbes?: number;
  now?: Clock;
}

/** The NATS leg: small echoes for latency, then chunks up and down for throughput. */
export async function measureNatsLeg(opts: NatsLegOptions): Promise<NetworkPathResult> {
  const now = opts.now ?? (() => performance.now());
  const latencies: number[] = [];
  for (let i = 0; i < (opts.latencyProbes ?? 5); i++) {
    const t0 = now();
    await opts.echo('', 0);
    latencies.push(now() - t0);
  }
  const chunk = filler(opts.chunkBytes);
  const transfers = opts.transfers ?? 8;
  let bytes = 0;
  const t0 = now();
  for (let i = 0; i < transfers; i++) {
    const up = i % 2 === 0;
    const reply = await opts.echo(up ? chunk : '', up ? 0 : opts.chunkBytes);
    if (up && reply.receivedBytes !== chunk.length) throw new Error(`echo received ${reply.receivedBytes} of ${chunk.length} bytes`);
    if (!up && reply.data.length !== opts.chunkBytes) throw new Error(`echo returned ${reply.data.length} of ${opts.chunkBytes} bytes`);
    bytes += opts.chunkBytes;
  }
  return pathResult(bytes, now() - t0, latencies);
}

export interface HttpLegOptions {
  /** POSTs `bytes` to the sink; resolves with the byte count the gateway read. */
  upload(bytes: number): Promise<number>;
  /** GETs `bytes` from the source; resolves with the byte count that arrived. */
  download(bytes: number): Promise<number>;
  bytes: number;
  latencyProbes?: number;
  now?: Clock;
}

/** The HTTP leg: empty downloads for latency, then one upload and one download of `bytes`. */
export async function measureHttpLeg(opts: HttpLegOptions): Promise<NetworkPathResult> {
  const now = opts.now ?? (() => performance.now());
  const latencies: number[] = [];
  for (let i = 0; i < (opts.latencyProbes ?? 3); i++) {
    const t0 = now();
    await opts.download(0);
    latencies.push(now() - t0);
  }
  const t0 = now();
  const up = await opts.upload(opts.bytes);
  if (up !== opts.bytes) throw new Error(`the gateway read ${up} of ${opts.bytes} bytes`);
  const down = await opts.download(opts.bytes);
  if (down !== opts.bytes) throw new Error(`received ${down} of ${opts.bytes} bytes`);
  return pathResult(up + down, now() - t0, latencies);
}
