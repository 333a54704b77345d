import { jest } from '@jest/globals';
import { type EndedChunk, MapsRepository } from '#tern/persistence';
import { TaskWaiters } from '../tasks/task-waiters.js';
import { newTestService } from '../../../../test/support/test-service.js';
import { MapSettler, SWEEP_SPACING_MS } from './map-settler.js';

/** Chunk `chunk` of map m1 (one input each), its task COMPLETE with the runner's list of outcomes. */
const ended = (chunk: number, outcome: unknown, returnExceptions = false): EndedChunk => ({
  mapId: 'm1',
  chunk,
  firstIndex: chunk,
  size: 1,
  taskId: `t${chunk}`,
  taskState: 'COMPLETE',
  result: [outcome],
  resultRef: null,
  error: null,
  returnExceptions,
  workspaceId: 'w1',
});

describe('MapSettler.run', () => {
  it("settles the chunks of a pass in one call per map, wakes the map's readers once, and fails the map at the first error in input order", async () => {
    const { sut, fake } = await newTestService(MapSettler);
    const maps = fake(MapsRepository);
    const waiters = fake(TaskWaiters);
    const bad = (n: number) => ({ status: 'error', error: `ValueError: ${n}` });
    maps.endedChunks.mockResolvedValueOnce([ended(3, bad(3)), ended(1, { status: 'ok', result: 1 }), ended(2, bad(2))]);
    maps.endedChunks.mockResolvedValue([]);
    maps.settleMany.mockResolvedValue({ state: 'running', chunks: [1, 2, 3] });
    maps.cancelTasks.mockResolvedValue([]);
    (sut as unknown as { noticed: Set<string> }).noticed.add('t1');
    await sut.run();
    expect(maps.settleMany).toHaveBeenCalledTimes(1);
    expect(maps.settleMany.mock.calls[0][1].map((c) => c.chunk)).toEqual([1, 2, 3]);
    expect(waiters.wake.mock.calls).toEqual([['m1']]);
    expect(maps.end).toHaveBeenCalledTimes(1);
    expect(maps.end).toHaveBeenCalledWith('m1', 'failed', 'input 2: ValueError: 2');
  });

  it('fails nothing when the map keeps errors in place, or had ended before', async () => {
    const { sut, fake } = await newTestService(MapSettler);
    const maps = fake(MapsRepository);
    maps.endedChunks.mockResolvedValueOnce([ended(0, { status: 'error', error: 'no' }, true)]);
    maps.endedChunks.mockResolvedValueOnce([ended(1, { status: 'error', error: 'no' })]);
    maps.endedChunks.mockResolvedValue([]);
    maps.settleMany.mockResolvedValueOnce({ state: 'running', chunks: [0] });
    maps.settleMany.mockResolvedValueOnce({ state: 'failed', chunks: [1] });
    for (const id of ['t0', 't1']) {
      (sut as unknown as { noticed: Set<string> }).noticed.add(id);
      await sut.run();
    }
    expect(maps.settleMany).toHaveBeenCalledTimes(2);
    expect(maps.end).not.toHaveBeenCalled();
  });

  afterEach(() => jest.restoreAllMocks());

  it('reads the chunks of the tasks it heard end on every run, but sweeps for missed ones at most once per spacing', async () => {
    const { sut, fake } = await newTestService(MapSettler);
    const maps = fake(MapsRepository);
    maps.endedChunks.mockResolvedValue([]);
    let now = 1_000_000;
    jest.spyOn(Date, 'now').mockImplementation(() => now);
    const sweeps = () => maps.endedChunks.mock.calls.filter(([ids]) => ids === undefined).length;
    const noticedReads = () => maps.endedChunks.mock.calls.filter(([ids]) => ids !== undefined).length;
    await sut.run();
    expect(sweeps()).toBe(1);
    for (let i = 0; i < 3; i++) {
      (sut as unknown as { noticed: Set<string> }).noticed.add(`t${i}`);
      now += 10;
      await sut.run();
    }
    expect(noticedReads()).toBe(3);
    expect(sweeps()).toBe(1);
    now += SWEEP_SPACING_MS;
    await sut.run();
    expect(sweeps()).toBe(2);
  });
});
