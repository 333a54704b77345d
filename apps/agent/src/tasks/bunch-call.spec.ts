import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TaskItem } from '#tern/contracts';
import { BunchCall, bunchSize, ChunkDurations, MAX_BUNCH } from './bunch-call.js';

describe('bunchSize: how many tasks a slot takes in one pull', () => {
  const alone = { pulling: 0, running: 0 };

  it('takes one until a task of the kind has been timed here', () => {
    expect(bunchSize(undefined, 1000, alone)).toBe(1);
  });

  it('fills about 100 ms at the mean duration, at most MAX_BUNCH; a long task alone', () => {
    expect(bunchSize(10, 1000, alone)).toBe(10);
    expect(bunchSize(0, 1000, alone)).toBe(MAX_BUNCH);
    expect(bunchSize(2, 1000, alone)).toBe(MAX_BUNCH);
    expect(bunchSize(60, 1000, alone)).toBe(1);
    expect(bunchSize(5000, 1000, alone)).toBe(1);
  });

  it("takes no more than the slot's share of what the consumer holds, so its pull does not wait on the other slots' tasks", () => {
    expect(bunchSize(1, 0, alone)).toBe(1);
    // Three slots pulling beside it: a quarter each.
    expect(bunchSize(1, 7, { pulling: 3, running: 0 })).toBe(2);
    expect(bunchSize(1, 40, { pulling: 3, running: 0 })).toBe(11);
    // Three running: one left for each as it comes back, the rest taken now.
    expect(bunchSize(1, 7, { pulling: 0, running: 3 })).toBe(5);
    expect(bunchSize(1, 2, { pulling: 0, running: 3 })).toBe(1);
    expect(bunchSize(1, 11, { pulling: 1, running: 2 })).toBe(5);
  });
});

describe('ChunkDurations: the mean that sizes a map’s bunches is its own map’s', () => {
  const chunkOf = (mapId?: string) =>
    ({
      payload: { __tern_map_chunk__: { inputs: [1], return_exceptions: false, ...(mapId ? { map_id: mapId } : {}) } },
    }) as unknown as TaskItem;

  it("a map's first chunk has no mean, whatever other maps of the deployment took", () => {
    const durations = new ChunkDurations();
    for (let i = 0; i < 20; i++) durations.ended(chunkOf('quick'), 5);
    expect(durations.mean(chunkOf('quick'), 5)).toBe(5);
    // A new map on the same deployment: its first pull takes one chunk, not 20 at the quick map's pace.
    expect(durations.mean(chunkOf('slow'), 5)).toBeUndefined();
    durations.ended(chunkOf('slow'), 1000);
    expect(bunchSize(durations.mean(chunkOf('slow'), 5), 100, { pulling: 1, running: 0 })).toBe(1);
    expect(durations.mean(chunkOf('quick'), 5)).toBe(5);
  });

  it('follows its map as its chunks end; a chunk that names no map (an older gateway) goes by the deployment', () => {
    const durations = new ChunkDurations();
    durations.ended(chunkOf('m'), 10);
    durations.ended(chunkOf('m'), 110);
    expect(durations.mean(chunkOf('m'), undefined)).toBeCloseTo(40);
    durations.ended(chunkOf(), 999);
    expect(durations.mean(chunkOf(), 7)).toBe(7);
    expect(durations.mean(chunkOf(), undefined)).toBeUndefined();
  });
});

describe('BunchCall: what the runner answered, member by member', () => {
  /** A stand-in runner answering a bunch with `lines`, then ending the answer. */
  async function runnerAnswering(lines: unknown[]): Promise<{ server: Server; port: number }> {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/x-ndjson', 'x-tern-bunches': '1' });
        res.end(lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return { server, port: (server.address() as AddressInfo).port };
  }
  const members = ['t-1', 't-2', 't-3'].map((taskId) => ({ taskId, attempt: 1, payload: {} }));

  it('gives each member begun its outcome; one the answer ended within is gone, those after it never begin', async () => {
    const { server, port } = await runnerAnswering([
      { task_id: 't-1', begun: true },
      { task_id: 't-1', status: 200, body: [{ status: 'ok', result: 1 }] },
      { task_id: 't-2', begun: true },
    ]);
    try {
      const call = new BunchCall({ host: '127.0.0.1', port }, members);
      expect(await call.turn(0)).toBe(true);
      expect(await call.outcome(0)).toEqual({ kind: 'ok', json: Buffer.from('[{"status":"ok","result":1}]') });
      expect(await call.turn(1)).toBe(true);
      expect(await call.outcome(1)).toMatchObject({ kind: 'gone' });
      expect(await call.turn(2)).toBe(false);
    } finally {
      server.close();
    }
  });

  it('believes no line for another task than the one due: the member running fails, the rest never begin', async () => {
    const { server, port } = await runnerAnswering([
      { task_id: 't-1', begun: true },
      { task_id: 't-3', status: 200, body: [] },
    ]);
    try {
      const call = new BunchCall({ host: '127.0.0.1', port }, members);
      expect(await call.turn(0)).toBe(true);
      expect(await call.outcome(0)).toMatchObject({ kind: 'error', message: expect.stringMatching(/where task t-1 was due/) });
      expect(await call.turn(1)).toBe(false);
      expect(await call.turn(2)).toBe(false);
    } finally {
      server.close();
    }
  });
});
