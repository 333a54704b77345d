import { jest } from '@jest/globals';
import { MapsRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { MapSettler, SWEEP_SPACING_MS } from './map-settler.js';

describe('MapSettler.run', () => {
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
