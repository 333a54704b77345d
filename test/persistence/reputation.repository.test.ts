import type { DataSource } from 'typeorm';
import { ReputationRepository } from '#tern/persistence';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('reputation-repo');
let db: DataSource;
let reputation: ReputationRepository;

beforeAll(async () => {
  db = database.db;
  reputation = new ReputationRepository(db);
  const at = (day: number) => new Date(`2026-01-0${day}T00:00:00Z`);
  await reputation.appendScores(
    [
      { machineId: 'm-a', score: 0.5, components: { uptime: 0.5 } },
      { machineId: 'm-b', score: 0.9, components: { uptime: 1 } },
    ],
    at(1),
  );
  await reputation.appendScores([{ machineId: 'm-a', score: 0.7, components: { uptime: 0.8 } }], at(2));
  await reputation.appendScores([{ machineId: 'm-a', score: 0.6, components: { uptime: 0.7 } }], at(3));
});

describe('ReputationRepository', () => {
  it('finds the newest score of the machines asked for', async () => {
    expect(await reputation.latestScores(['m-a', 'm-none'])).toEqual([
      { machineId: 'm-a', score: 0.6, components: { uptime: 0.7 }, computedAt: new Date('2026-01-03T00:00:00Z') },
    ]);
    expect(await reputation.latestScores([])).toEqual([]);
  });

  it('finds the newest score of every machine when none are named', async () => {
    const all = await reputation.latestScores();
    expect(all.map((s) => [s.machineId, s.score])).toEqual([
      ['m-a', 0.6],
      ['m-b', 0.9],
    ]);
  });

  it("gives a machine's history newest first, from a time and up to a limit", async () => {
    expect((await reputation.history('m-a', undefined, 10)).map((s) => s.score)).toEqual([0.6, 0.7, 0.5]);
    expect((await reputation.history('m-a', new Date('2026-01-02T00:00:00Z'), 10)).map((s) => s.score)).toEqual([0.6, 0.7]);
    expect((await reputation.history('m-a', undefined, 1)).map((s) => s.score)).toEqual([0.6]);
    expect(await reputation.history('m-none', undefined, 10)).toEqual([]);
  });

  it('stores machine records, replacing them on the next save', async () => {
    await reputation.saveMachineRecords([]);
    await reputation.saveMachineRecords([
      { machineId: 'm-a', pool: 'default', record: { heartbeats: { count: 1 } } },
      { machineId: 'm-b', pool: null, record: { heartbeats: { count: 2 } } },
    ]);
    await reputation.saveMachineRecords([{ machineId: 'm-a', pool: 'gpu', record: { heartbeats: { count: 3 } } }]);
    const records = await reputation.machineRecords();
    expect(records.sort((x, y) => x.machineId.localeCompare(y.machineId))).toEqual([
      { machineId: 'm-a', pool: 'gpu', record: { heartbeats: { count: 3 } } },
      { machineId: 'm-b', pool: null, record: { heartbeats: { count: 2 } } },
    ]);
  });
});
