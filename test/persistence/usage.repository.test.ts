import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import {
  Deployment,
  MeteredContainer,
  MeteredTask,
  ReputationRepository,
  UsageInterval,
  UsageRepository,
  type UsageSliceRow,
  Workspace,
} from '#tern/persistence';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('usage-repo');
let db: DataSource;
let usage: UsageRepository;

beforeAll(async () => {
  db = database.db;
  usage = new UsageRepository(db);
});

const allotment = { cpuMillicores: 2000, memoryBytes: 4 * 2 ** 30, gpuCount: 1, gpuType: 'H100' };

function identity(containerId = `c-${randomUUID()}`, workspaceId = 'ws-1', machineId = 'm-1') {
  return { containerId, workspaceId, deploymentId: 'dep-1', deploymentVersion: 1, machineId };
}

function slice(containerId: string, hour: string, seconds: number, fields: Partial<UsageSliceRow> = {}): UsageSliceRow {
  const start = new Date(`2026-01-01T${hour}:00:00Z`);
  return {
    eventId: `${containerId}:${start.toISOString()}`,
    workspaceId: 'ws-1',
    deploymentId: 'dep-1',
    containerId,
    machineId: 'm-1',
    gpuType: 'H100',
    gpuCount: 1,
    cpuMillicores: 1000,
    memoryBytes: 2 ** 30,
    periodStart: start.toISOString(),
    periodEnd: new Date(start.getTime() + seconds * 1000).toISOString(),
    seconds,
    ...fields,
  };
}

const metered = (containerId: string) => db.getRepository(MeteredContainer).findOneByOrFail({ containerId });
const task = (taskId: string) => db.getRepository(MeteredTask).findOneByOrFail({ taskId, attempt: 1 });

describe('UsageRepository', () => {
  describe('task attempts', () => {
    const attempt = (taskId: string) => ({
      taskId,
      attempt: 1,
      workspaceId: 'ws-1',
      deploymentId: 'dep-1',
      containerId: 'c-1',
      machineId: 'm-1',
    });

    it('lets a completion beat a failure of the same attempt, whatever the order', async () => {
      const a = attempt(`t-${randomUUID()}`);
      await usage.recordTaskStarted(a, '2026-01-01T00:00:00Z');
      expect(await task(a.taskId)).toMatchObject({ outcome: 'running', startedAt: new Date('2026-01-01T00:00:00Z') });
      await usage.recordTaskFinished(a, { outcome: 'completed', cause: null, durationMs: 1500, endedAt: '2026-01-01T00:00:02Z' });
      await usage.recordTaskFinished(a, { outcome: 'failed', cause: 'timeout', durationMs: 9000, endedAt: '2026-01-01T00:00:09Z' });
      expect(await task(a.taskId)).toMatchObject({ outcome: 'completed', cause: null, durationMs: 1500 });

      const b = attempt(`t-${randomUUID()}`);
      await usage.recordTaskFinished(b, { outcome: 'failed', cause: 'timeout', durationMs: 9000, endedAt: '2026-01-01T00:00:09Z' });
      await usage.recordTaskFinished(b, { outcome: 'completed', cause: null, durationMs: 1500, endedAt: '2026-01-01T00:00:02Z' });
      await usage.recordTaskStarted(b, '2026-01-01T00:00:00Z');
      expect(await task(b.taskId)).toMatchObject({
        outcome: 'completed',
        cause: null,
        durationMs: 1500,
        startedAt: new Date('2026-01-01T00:00:00Z'),
      });
    });

    it('records many attempts in one statement as one by one, and refuses a statement naming an attempt twice', async () => {
      const [a, b] = [attempt(`t-${randomUUID()}`), { ...attempt(`t-${randomUUID()}`), containerId: null }];
      await usage.recordTasksStarted([
        { attempt: a, startedAt: '2026-01-01T00:00:00Z' },
        { attempt: b, startedAt: '2026-01-01T00:00:01Z' },
      ]);
      const end = { outcome: 'completed' as const, cause: null, durationMs: 1500, endedAt: '2026-01-01T00:00:02Z' };
      await usage.recordTasksFinished([
        { attempt: a, end },
        { attempt: b, end: { ...end, outcome: 'failed', cause: 'timeout' } },
      ]);
      expect(await task(a.taskId)).toMatchObject({ outcome: 'completed', durationMs: 1500, startedAt: new Date('2026-01-01T00:00:00Z') });
      expect(await task(b.taskId)).toMatchObject({ outcome: 'failed', cause: 'timeout', containerId: null, machineId: 'm-1' });
      // The ledger writes such a batch again one by one (GroupCommit).
      await expect(
        usage.recordTasksFinished([
          { attempt: a, end },
          { attempt: a, end },
        ]),
      ).rejects.toThrow(/cannot affect row a second time/);
    });

    it('merges two reports of the same outcome to the longest duration and latest end', async () => {
      const a = attempt(`t-${randomUUID()}`);
      await usage.recordTaskFinished(a, { outcome: 'failed', cause: 'handler', durationMs: 100, endedAt: '2026-01-01T00:00:05Z' });
      await usage.recordTaskFinished(a, { outcome: 'failed', cause: 'timeout', durationMs: 300, endedAt: '2026-01-01T00:00:03Z' });
      expect(await task(a.taskId)).toMatchObject({
        outcome: 'failed',
        cause: 'handler',
        durationMs: 300,
        endedAt: new Date('2026-01-01T00:00:05Z'),
      });
    });
  });

  describe('metered containers', () => {
    it('keeps the earliest start and the earliest end, whatever the order', async () => {
      const c = identity();
      const ended = await usage.recordContainerEnded(c, '2026-01-01T01:00:00Z', 'stopped');
      expect(ended).toMatchObject({
        containerId: c.containerId,
        startedAt: null,
        endedAt: new Date('2026-01-01T01:00:00Z'),
        cpuMillicores: null,
        memoryBytes: null,
      });
      const started = await usage.recordContainerStarted(c, allotment, '2026-01-01T00:00:00Z');
      expect(started).toEqual({
        ...c,
        cpuMillicores: 2000,
        memoryBytes: 4 * 2 ** 30,
        gpuCount: 1,
        gpuType: 'H100',
        startedAt: new Date('2026-01-01T00:00:00Z'),
        endedAt: new Date('2026-01-01T01:00:00Z'),
        accruedTo: null,
      });
      await usage.recordContainerStarted(c, allotment, '2026-01-01T00:30:00Z');
      await usage.recordContainerEnded(c, '2026-01-01T00:45:00Z', 'machine-lost');
      await usage.recordContainerEnded(c, '2026-01-01T00:50:00Z', 'crashed');
      expect(await metered(c.containerId)).toMatchObject({
        startedAt: new Date('2026-01-01T00:00:00Z'),
        endedAt: new Date('2026-01-01T00:45:00Z'),
        endReason: 'machine-lost',
      });
    });

    it('forgets how far checkpoints went when an earlier start arrives, and advances accrued_to only forward', async () => {
      const c = identity();
      await usage.recordContainerStarted(c, allotment, '2026-01-01T00:10:00Z');
      await usage.advanceAccruedTo([c.containerId], new Date('2026-01-01T00:20:00Z'));
      await usage.advanceAccruedTo([c.containerId], new Date('2026-01-01T00:15:00Z'));
      expect((await metered(c.containerId)).accruedTo).toEqual(new Date('2026-01-01T00:20:00Z'));
      await usage.recordContainerStarted(c, allotment, '2026-01-01T00:12:00Z');
      expect((await metered(c.containerId)).accruedTo).toEqual(new Date('2026-01-01T00:20:00Z'));
      await usage.recordContainerStarted(c, allotment, '2026-01-01T00:05:00Z');
      expect((await metered(c.containerId)).accruedTo).toBeNull();
      await usage.recordContainerEnded(c, '2026-01-01T00:30:00Z', 'stopped');
      await usage.markAccruedToEnd(c.containerId);
      expect((await metered(c.containerId)).accruedTo).toEqual(new Date('2026-01-01T00:30:00Z'));
    });

    it('claims running containers in id order, after a given id, with the database clock', async () => {
      const prefix = `claim-${randomUUID().slice(0, 8)}`;
      const [a, b, c] = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`];
      for (const id of [a, b, c]) await usage.recordContainerStarted(identity(id), allotment, '2026-01-01T00:00:00Z');
      await usage.recordContainerEnded(identity(c), '2026-01-01T00:01:00Z', 'stopped');
      await usage.recordContainerEnded(identity(`${prefix}-z`), '2026-01-01T00:01:00Z', 'stopped'); // no start
      const { containers, now } = await usage.transaction((tx) => tx.claimRunning(`${prefix}-`, 1000));
      expect(containers.filter((m) => m.containerId.startsWith(prefix)).map((m) => m.containerId)).toEqual([a, b]);
      expect(now).toBeInstanceOf(Date);
      const after = await usage.transaction((tx) => tx.claimRunning(a, 1000));
      expect(after.containers.map((m) => m.containerId)).toContain(b);
      expect(after.containers.map((m) => m.containerId)).not.toContain(a);
      expect(await usage.transaction((tx) => tx.claimRunning('\uffff', 1000))).toEqual({ containers: [], now: undefined });
    });

    it('skips containers another transaction holds, so two checkpoints claim disjoint sets', async () => {
      const prefix = `skip-${randomUUID().slice(0, 8)}`;
      const ids = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`, `${prefix}-d`];
      for (const id of ids) await usage.recordContainerStarted(identity(id), allotment, '2026-01-01T00:00:00Z');
      const mine = (list: { containerId: string }[]) => list.map((m) => m.containerId).filter((id) => id.startsWith(prefix));

      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let claimed!: (ids: string[]) => void;
      const firstClaimed = new Promise<string[]>((r) => (claimed = r));
      const first = usage.transaction(async (tx) => {
        claimed(mine((await tx.claimRunning(`${prefix}-`, 2)).containers));
        await held;
      });
      const firstIds = await firstClaimed;
      const secondIds = mine((await usage.transaction((tx) => tx.claimRunning(`${prefix}-`, 1000))).containers);
      // A container whose event is being applied is skipped too.
      const applying = usage.transaction(async (tx) => {
        await tx.recordContainerEnded(identity(`${prefix}-d`), '2026-01-01T02:00:00Z', 'stopped');
        const during = mine((await usage.transaction((other) => other.claimRunning(`${prefix}-`, 1000))).containers);
        expect(during).not.toContain(`${prefix}-d`);
      });
      await applying;
      release();
      await first;
      expect(firstIds).toEqual([`${prefix}-a`, `${prefix}-b`]);
      expect(secondIds).toEqual([`${prefix}-c`, `${prefix}-d`]);
    });
  });

  describe('usage intervals', () => {
    it('lets a checkpoint grow an open slice but never a closed one, and a close replace either', async () => {
      const c = `c-${randomUUID()}`;
      await usage.upsertSlices([slice(c, '00', 60)], false);
      await usage.upsertSlices([slice(c, '00', 120)], false);
      const stored = () => db.getRepository(UsageInterval).findOneByOrFail({ containerId: c });
      expect(await stored()).toMatchObject({ seconds: 120, closed: false, memoryBytes: 2 ** 30 });
      await usage.upsertSlices([slice(c, '00', 90)], true);
      await usage.upsertSlices([slice(c, '00', 3600)], false);
      expect(await stored()).toMatchObject({ seconds: 90, closed: true });
      await usage.upsertSlices([slice(c, '00', 80)], true);
      expect(await stored()).toMatchObject({ seconds: 80, closed: true });
      await usage.upsertSlices([], true);
    });

    it("removes a container's slices and says what they were", async () => {
      const c = `c-${randomUUID()}`;
      await usage.upsertSlices([slice(c, '00', 3600), slice(c, '01', 60)], false);
      const removed = await usage.removeSlicesOf(c);
      expect(removed.sort((a, b) => a.seconds - b.seconds)).toEqual([
        { eventId: `${c}:2026-01-01T01:00:00.000Z`, periodStart: new Date('2026-01-01T01:00:00Z'), seconds: 60 },
        { eventId: `${c}:2026-01-01T00:00:00.000Z`, periodStart: new Date('2026-01-01T00:00:00Z'), seconds: 3600 },
      ]);
      expect(await usage.removeSlicesOf(c)).toEqual([]);
    });
  });

  describe('reports', () => {
    let ws: Workspace;
    let dep: Deployment;
    const day = '2026-03-01';

    beforeAll(async () => {
      ws = await db.getRepository(Workspace).save({ name: `report-${randomUUID()}` });
      dep = await db.getRepository(Deployment).save({ workspaceId: ws.id, name: 'model', kind: 'task_queue' });
      const at = (hour: string) => ({ periodStart: `${day}T${hour}:00:00.000Z`, periodEnd: `${day}T${hour}:30:00.000Z` });
      const base = {
        workspaceId: ws.id,
        deploymentId: dep.id,
        gpuType: 'H100',
        gpuCount: 2,
        cpuMillicores: 1000,
        memoryBytes: 2 ** 30,
        seconds: 1800,
      };
      await usage.upsertSlices(
        [
          { ...slice('r-1', '00', 1800, base), eventId: 'r-1:0', containerId: 'r-1', machineId: 'm-r1', ...at('00') },
          { ...slice('r-1', '01', 1800, base), eventId: 'r-1:1', containerId: 'r-1', machineId: 'm-r1', ...at('01') },
          {
            ...slice('r-2', '00', 1800, base),
            eventId: 'r-2:0',
            containerId: 'r-2',
            machineId: 'm-r2',
            gpuCount: 0,
            gpuType: null,
            ...at('00'),
          },
        ],
        true,
      );
      // The tasks' GPU type comes from their container's allotment.
      await usage.recordContainerStarted(
        { ...identity('r-1', ws.id, 'm-r1'), deploymentId: dep.id },
        { ...allotment, gpuCount: 2 },
        `${day}T00:00:00Z`,
      );
      const attempt = { attempt: 1, workspaceId: ws.id, deploymentId: dep.id, containerId: 'r-1', machineId: 'm-r1' };
      await usage.recordTaskFinished(
        { ...attempt, taskId: `rt-${randomUUID()}` },
        { outcome: 'completed', cause: null, durationMs: 2000, endedAt: `${day}T00:10:00Z` },
      );
      await usage.recordTaskFinished(
        { ...attempt, taskId: `rt-${randomUUID()}` },
        { outcome: 'failed', cause: 'handler', durationMs: 1000, endedAt: `${day}T01:10:00Z` },
      );
      const reputation = new ReputationRepository(db);
      await reputation.appendScores(
        [{ machineId: 'm-r1', score: 0.8, components: {}, observed: 0, standing: 'unproven' }],
        new Date(`${day}T00:00:00Z`),
      );
      await reputation.appendScores(
        [{ machineId: 'm-r1', score: 0.2, components: {}, observed: 0, standing: 'unproven' }],
        new Date(`${day}T12:00:00Z`),
      );
    });

    const window = { from: new Date(`${day}T00:00:00Z`), to: new Date(`${day}T02:00:00Z`) };

    it('sums usage and task outcomes per group over the window, with names', async () => {
      const rows = await usage.report({ ...window, groupBy: 'deployment', bucket: null, workspaceId: ws.id });
      expect(rows).toEqual([
        {
          group: dep.id,
          name: 'model',
          periodStart: window.from.toISOString(),
          periodEnd: window.to.toISOString(),
          gpuSeconds: 2 * 1800 * 2,
          cpuCoreSeconds: 3 * 1800,
          memoryGibSeconds: 3 * 1800,
          containerSeconds: 3 * 1800,
          tasksCompleted: 1,
          tasksFailed: 1,
          taskSeconds: 3,
        },
      ]);
    });

    it('buckets by hour, prorates slices cut by the window and keys GPU groups by type', async () => {
      const rows = await usage.report({
        from: new Date(`${day}T00:15:00Z`),
        to: window.to,
        groupBy: 'gpu',
        bucket: 'hour',
        workspaceId: ws.id,
      });
      expect(rows.map((r) => [r.periodStart, r.group, r.containerSeconds, r.tasksCompleted, r.tasksFailed])).toEqual([
        [`${day}T00:00:00.000Z`, 'H100', 900, 0, 0],
        [`${day}T00:00:00.000Z`, 'none', 900, 0, 0],
        [`${day}T01:00:00.000Z`, 'H100', 1800, 0, 1],
      ]);
      expect(rows[0].name).toBeNull();
      expect(rows[0].periodEnd).toBe(`${day}T01:00:00.000Z`);
      expect(await usage.report({ ...window, groupBy: 'workspace', bucket: null, workspaceId: 'ws-none' })).toEqual([]);
    });

    it("gives each machine's GPU seconds with its score as of the window's end", async () => {
      const served = await usage.gpuSecondsByMachine(window.from, window.to);
      expect(served.filter((m) => m.machineId.startsWith('m-r')).sort((a, b) => a.machineId.localeCompare(b.machineId))).toEqual([
        { machineId: 'm-r1', gpuSeconds: 2 * 1800 * 2, score: 0.8 },
        { machineId: 'm-r2', gpuSeconds: 0, score: null },
      ]);
    });
  });
});
