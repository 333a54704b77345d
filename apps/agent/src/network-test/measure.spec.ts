import { echoChunkBytes, failedPath, filler, measureHttpLeg, measureNatsLeg, median, networkVerdict, throughputMbps } from './measure.js';

/** A clock that moves only when the fake transport says time passed. */
function fakeClock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('network test arithmetic', () => {
  it('converts bytes over time into megabits per second', () => {
    expect(throughputMbps(125_000_000, 1000)).toBe(1000);
    expect(throughputMbps(1_000_000, 80)).toBe(100);
    expect(throughputMbps(0, 10)).toBe(0);
    expect(throughputMbps(10, 0)).toBe(0);
  });

  it('takes the median for latency', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBe(0);
  });

  it('fits echo chunks under the server max_payload', () => {
    expect(echoChunkBytes(1_048_576)).toBe(1_000_000);
    expect(echoChunkBytes(65_536)).toBe(61_440);
    expect(echoChunkBytes(undefined)).toBe(1_000_000);
  });

  it('makes printable filler of the exact size', () => {
    const f = filler(10_000);
    expect(f).toHaveLength(10_000);
    expect(f).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it('measures the NATS leg: latency from small echoes, throughput from 8 chunks up and down', async () => {
    const clock = fakeClock();
    const sizes: [number, number][] = [];
    const result = await measureNatsLeg({
      chunkBytes: 1_000_000,
      now: clock.now,
      echo: async (data, replyBytes) => {
        sizes.push([data.length, replyBytes]);
        // 2 ms per round trip, plus 10 ms per megabyte either way: 800 Mbps on the wire.
        clock.advance(2 + (data.length + replyBytes) / 100_000);
        return { receivedBytes: data.length, data: 'y'.repeat(replyBytes) };
      },
    });
    expect(sizes.slice(0, 5)).toEqual(Array(5).fill([0, 0]));
    expect(sizes.slice(5)).toEqual([
      [1_000_000, 0],
      [0, 1_000_000],
      [1_000_000, 0],
      [0, 1_000_000],
      [1_000_000, 0],
      [0, 1_000_000],
      [1_000_000, 0],
      [0, 1_000_000],
    ]);
    // 8 MB in 8 × 12 ms.
    expect(result).toEqual({ throughputMbps: 666.67, latencyMs: 2 });
  });

  it('fails the NATS leg when an echo comes back short', async () => {
    await expect(
      measureNatsLeg({ chunkBytes: 1000, echo: async (data) => ({ receivedBytes: Math.floor(data.length / 2), data: '' }) }),
    ).rejects.toThrow(/received 500 of 1000 bytes/);
  });

  it('measures the HTTP leg: one upload and one download', async () => {
    const clock = fakeClock();
    const result = await measureHttpLeg({
      bytes: 8_000_000,
      now: clock.now,
      upload: async (n) => (clock.advance(100), n),
      download: async (n) => (clock.advance(n ? 60 : 3), n),
    });
    expect(result).toEqual({ throughputMbps: 800, latencyMs: 3 });
    await expect(measureHttpLeg({ bytes: 10, upload: async () => 5, download: async (n) => n })).rejects.toThrow(/read 5 of 10/);
  });

  it('judges like the scheduler: the slower leg counts, a failed leg fails', () => {
    const fast = { throughputMbps: 900, latencyMs: 1 };
    const slow = { throughputMbps: 40, latencyMs: 9 };
    expect(networkVerdict(fast, slow, undefined)).toEqual({ ok: true, throughputMbps: 40 });
    expect(networkVerdict(fast, fast, 100)).toEqual({ ok: true, throughputMbps: 900 });
    expect(networkVerdict(fast, slow, 100)).toEqual({
      ok: false,
      throughputMbps: 40,
      reason: "network 40 Mbps (http) is below the pool's minimum of 100 Mbps",
    });
    expect(networkVerdict(failedPath('no responders'), fast, 100).reason).toBe(
      'network test over nats failed (no responders); the pool needs 100 Mbps',
    );
  });
});
