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
      { machineId: 'm-a', score: 0.5, components: { uptime: 0.5 }, observed: 0, standing: 'unproven' },
      { machineId: 'm-b', score: 0.9, components: { uptime: 1 }, observed: 7.5, standing: 'proven' },
    ],
    at(1),
  );
  await reputation.appendScores([{ machineId: 'm-a', score: 0.7, components: { uptime: 0.8 }, observed: 2, standing: 'unproven' }], at(2));
  await reputation.appendScores([{ machineId: 'm-a', score: 0.6, components: { uptime: 0.7 }, observed: 5.25, standing: 'proven' }], at(3));
});

describe('ReputationRepository', () => {
  it('finds the newest score of the machines asked for', async () => {
    expect(await reputation.latestScores(['m-a', 'm-none'])).toEqual([
      {
        machineId: 'm-a',
        score: 0.6,
        components: { uptime: 0.7 },
        observed: 5.25,
        standing: 'proven',
        computedAt: new Date('2026-01-03T00:00:00Z'),
      },
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

  it('changes machine records under their locks, the document only where it is given', async () => {
    const before = await reputation.machineRecordsChangedSince(null);
    await reputation.transaction(async (tx) => {
      // Created empty when missing; the document of a machine without transitions always comes.
      const rows = await tx.lockMachineRecords(['m-a', 'm-b'], ['m-a']);
      expect(rows).toEqual([
        { machineId: 'm-a', pool: null, record: {}, heartbeats: null, hasTransitions: false },
        { machineId: 'm-b', pool: null, record: {}, heartbeats: null, hasTransitions: false },
      ]);
      await tx.writeMachineRecords([
        {
          machineId: 'm-a',
          pool: 'gpu',
          record: { transitions: [{ at: 1, online: true }] },
          heartbeats: { lastSequence: 1 },
          hasTransitions: true,
        },
        { machineId: 'm-b', pool: null, record: { transitions: [{ at: 2, online: true }] }, heartbeats: null, hasTransitions: true },
      ]);
    });
    // A heartbeat-only change: m-b's document is neither read nor written.
    await reputation.transaction(async (tx) => {
      const rows = await tx.lockMachineRecords(['m-b'], []);
      expect(rows).toEqual([{ machineId: 'm-b', pool: null, heartbeats: null, hasTransitions: true }]);
      await tx.writeMachineRecords([{ machineId: 'm-b', pool: 'cpu', heartbeats: { lastSequence: 7 }, hasTransitions: true }]);
    });
    expect(await reputation.machineRecord('m-b')).toEqual({
      machineId: 'm-b',
      pool: 'cpu',
      record: { transitions: [{ at: 2, online: true }] },
      heartbeats: { lastSequence: 7 },
      hasTransitions: true,
    });
    expect(await reputation.machineRecord('m-none')).toBeUndefined();

    // Read back: everything the first time; then the changed rows, the document only where it changed.
    const changed = await reputation.machineRecordsChangedSince(before.readAt);
    expect(changed.records.sort((x, y) => x.machineId.localeCompare(y.machineId))).toEqual([
      {
        machineId: 'm-a',
        pool: 'gpu',
        record: { transitions: [{ at: 1, online: true }] },
        heartbeats: { lastSequence: 1 },
        hasTransitions: true,
      },
      {
        machineId: 'm-b',
        pool: 'cpu',
        record: { transitions: [{ at: 2, online: true }] },
        heartbeats: { lastSequence: 7 },
        hasTransitions: true,
      },
    ]);
    await reputation.transaction(async (tx) => {
      await tx.lockMachineRecords(['m-b'], []);
      await tx.writeMachineRecords([{ machineId: 'm-b', pool: 'cpu', heartbeats: { lastSequence: 8 }, hasTransitions: true }]);
    });
    const beats = await reputation.machineRecordsChangedSince(changed.readAt);
    expect(beats.records).toEqual([{ machineId: 'm-b', pool: 'cpu', heartbeats: { lastSequence: 8 }, hasTransitions: true }]);
    // Documents alone: a heartbeat-only change is not read, nor one before heartbeatsSince.
    expect((await reputation.machineRecordsChangedSince(changed.readAt, false)).records).toEqual([]);
    expect((await reputation.machineRecordsChangedSince(changed.readAt, beats.readAt)).records).toEqual([]);
    expect((await reputation.machineRecordsChangedSince(beats.readAt)).records).toEqual([]);
  });

  it('makes a second replica changing the same machine wait for the first', async () => {
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const first = reputation.transaction(async (tx) => {
      await tx.lockMachineRecords(['m-lock'], ['m-lock']);
      order.push('first locked');
      await held;
      await tx.writeMachineRecords([{ machineId: 'm-lock', pool: null, record: { n: 1 }, heartbeats: null, hasTransitions: false }]);
      order.push('first wrote');
    });
    await new Promise((r) => setTimeout(r, 100));
    const second = reputation.transaction(async (tx) => {
      const [row] = await tx.lockMachineRecords(['m-lock'], ['m-lock']);
      order.push(`second read n=${(row.record as { n?: number }).n}`);
    });
    await new Promise((r) => setTimeout(r, 200));
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first locked', 'first wrote', 'second read n=1']);
  });
});
