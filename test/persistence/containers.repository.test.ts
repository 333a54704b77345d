import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { Container, ContainersRepository, DEFAULT_POOL, Deployment, DeploymentVersion, Machine, Pool, Workspace } from '#tern/persistence';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('containers-repo');
let db: DataSource;
let containers: ContainersRepository;

beforeAll(async () => {
  db = database.db;
  containers = new ContainersRepository(db);
});

const ORDER = ['pending', 'scheduled', 'starting', 'running', 'stopping', 'stopped', 'failed'];
const ACTIVE = ['scheduled', 'starting', 'running'];
const requested = { cpuMillicores: 1000, memoryBytes: 1 << 30, gpuCount: 0 };

async function version(desiredContainers = 0, spec: object = {}): Promise<DeploymentVersion> {
  const ws = await db.getRepository(Workspace).save({ name: `ws-${randomUUID()}` });
  const dep = await db.getRepository(Deployment).save({ workspaceId: ws.id, name: 'llm', kind: 'endpoint' });
  return db.getRepository(DeploymentVersion).save({ deploymentId: dep.id, version: 1, spec, desiredContainers });
}

async function machine(state: Machine['state'] = 'ready', pool = DEFAULT_POOL): Promise<string> {
  const id = `m-${randomUUID()}`;
  await db.getRepository(Machine).save({ id, pool, state });
  return id;
}

async function container(
  versionId: string,
  machineId: string | null,
  state: Container['state'],
  readyAt: Date | null = null,
): Promise<string> {
  const id = `c-${randomUUID()}`;
  await db.getRepository(Container).save({ id, deploymentVersionId: versionId, machineId, state, requested, readyAt });
  return id;
}

const row = (id: string) => db.getRepository(Container).findOneByOrFail({ id });
/** The faults waiting in the outbox for these containers: [container, machine, kind, after ready]. */
const faultsOf = async (...ids: string[]) =>
  (
    (await db.query(
      `SELECT container_id, machine_id, kind, after_ready FROM machine_fault_outbox WHERE container_id = ANY($1) ORDER BY container_id`,
      [ids],
    )) as { container_id: string; machine_id: string; kind: string; after_ready: boolean }[]
  ).map((f) => [f.container_id, f.machine_id, f.kind, f.after_ready]);

describe('ContainersRepository', () => {
  describe('lifecycle events', () => {
    it('inserts a container from its first event only once, and only for a known version', async () => {
      const v = await version();
      const m = await machine();
      const id = `c-${randomUUID()}`;
      const progress = { state: 'running' as const, reason: null, startedAt: '2026-01-01T00:00:10Z' };
      expect(await containers.applyProgress(id, m, progress, ORDER)).toBe(false);
      expect(await containers.insertFromEvent(id, m, progress, randomUUID(), 1)).toBe(false);
      expect(await containers.insertFromEvent(id, m, progress, v.deploymentId, 1)).toBe(true);
      expect(await containers.insertFromEvent(id, m, progress, v.deploymentId, 1)).toBe(false);
      expect(await row(id)).toMatchObject({ state: 'running', machineId: m, requested: {}, startedAt: new Date('2026-01-01T00:00:10Z') });
    });

    it('moves the state only forward and keeps the earliest timestamps', async () => {
      const v = await version();
      const m = await machine();
      const id = await container(v.id, m, 'running');
      await containers.applyProgress(id, m, { state: 'running', reason: null, startedAt: '2026-01-01T00:00:10Z' }, ORDER);
      // A late `starting` with an earlier start: the state stays, the earlier time wins.
      expect(await containers.applyProgress(id, m, { state: 'starting', reason: 'late', startedAt: '2026-01-01T00:00:05Z' }, ORDER)).toBe(
        true,
      );
      expect(await row(id)).toMatchObject({ state: 'running', stateReason: null, startedAt: new Date('2026-01-01T00:00:05Z') });
      await containers.applyProgress(id, m, { state: 'failed', reason: 'oom', exitCode: 137, oomKilled: true }, ORDER);
      await containers.applyProgress(id, m, { state: 'stopped', reason: 'stop', exitCode: 0 }, ORDER);
      expect(await row(id)).toMatchObject({ state: 'failed', stateReason: 'oom', exitCode: 0, oomKilled: true });
    });

    it('keeps the machine when the event names one that does not exist, and merges what was requested', async () => {
      const v = await version();
      const m = await machine();
      const id = `c-${randomUUID()}`;
      await containers.insertScheduled({
        id,
        deploymentVersionId: v.id,
        machineId: m,
        reason: 'scale-up',
        requested: { ...requested, gpuCount: 1, gpuIndexes: [3] },
      });
      await containers.applyProgress(id, 'm-gone', { state: 'starting', reason: null, requested: { ...requested, gpuCount: 1 } }, ORDER);
      expect(await row(id)).toMatchObject({ machineId: m, state: 'starting', requested: { gpuCount: 1, gpuIndexes: [3] } });
    });

    it('finds the containers machines run that the scheduler gave up or placed elsewhere, many machines at once', async () => {
      const v = await version();
      const [m, other] = [await machine(), await machine()];
      const mine = await container(v.id, m, 'running');
      const stopped = await container(v.id, m, 'stopped');
      const elsewhere = await container(v.id, other, 'running');
      const running = [mine, stopped, elsewhere, 'c-unknown'].map((containerId) => ({ machineId: m, containerId }));
      // The other machine's own container, in the same statement, is wanted where it is.
      running.push({ machineId: other, containerId: elsewhere });
      const unwanted = await containers.unwantedAmong(running, ['stopped', 'failed']);
      expect(unwanted.map((u) => `${u.machineId}/${u.containerId}`).sort()).toEqual([`${m}/${stopped}`, `${m}/${elsewhere}`].sort());
    });
  });

  describe('reconciliation', () => {
    it('lists the versions that want containers or still run some', async () => {
      const wanted = await version(2, { image: 'x' });
      const running = await version(0);
      const idle = await version(0);
      await container(running.id, await machine(), 'running');
      await container(idle.id, await machine(), 'stopped');
      const listed = await containers.versionsToReconcile(ACTIVE);
      const ids = listed.map((v) => v.id);
      expect(ids).toEqual(expect.arrayContaining([wanted.id, running.id]));
      expect(ids).not.toContain(idle.id);
      expect(listed.find((v) => v.id === wanted.id)).toEqual({
        id: wanted.id,
        deploymentId: wanted.deploymentId,
        version: 1,
        spec: { image: 'x' },
        desiredContainers: 2,
        idleContainers: [],
        placementReason: null,
        workspaceId: expect.any(String),
        kind: 'endpoint',
        deploymentState: 'pending',
        latest: false,
        crashes: 0,
        lastCrashAt: null,
      });
    });

    it("lists a version's active containers oldest first", async () => {
      const v = await version(1);
      const m = await machine();
      const first = await container(v.id, m, 'running', new Date());
      const second = await container(v.id, m, 'scheduled');
      await container(v.id, m, 'stopping');
      expect(await containers.activeOf(v.id, ACTIVE)).toEqual([
        { id: first, readyAt: expect.any(Date) },
        { id: second, readyAt: null },
      ]);
    });

    it('fails the containers of offline or removed machines, each once', async () => {
      const v = await version(1);
      const offline = await machine('offline');
      const removed = await machine('ready');
      const ready = await machine('ready');
      const lostOffline = await container(v.id, offline, 'running');
      const lostRemoved = await container(v.id, removed, 'starting');
      const kept = await container(v.id, ready, 'running');
      const done = await container(v.id, offline, 'stopped');
      await db.getRepository(Machine).delete({ id: removed });

      const lost = await containers.failOnOfflineMachines();
      expect(lost).toEqual(
        expect.arrayContaining([
          {
            id: lostOffline,
            machineId: offline,
            stateReason: 'machine offline',
            deploymentId: v.deploymentId,
            version: 1,
            workspaceId: expect.any(String),
          },
          {
            id: lostRemoved,
            machineId: null,
            stateReason: 'machine removed',
            deploymentId: v.deploymentId,
            version: 1,
            workspaceId: expect.any(String),
          },
        ]),
      );
      expect(lost.map((c) => c.id)).not.toContain(kept);
      expect(lost.map((c) => c.id)).not.toContain(done);
      expect(await row(lostOffline)).toMatchObject({ state: 'failed', stoppedAt: expect.any(Date) });
      expect((await row(kept)).state).toBe('running');
      expect((await containers.failOnOfflineMachines()).map((c) => c.id)).not.toContain(lostOffline);
      // One fault for reputation per container lost with a machine it can be charged to, in the same statement.
      expect(await faultsOf(lostOffline, lostRemoved, kept, done)).toEqual([[lostOffline, offline, 'container-lost', false]]);
      const wasReady = await container(v.id, offline, 'running', new Date());
      await containers.failOnOfflineMachines();
      expect(await faultsOf(wasReady)).toEqual([[wasReady, offline, 'container-lost', true]]);
    });

    it('fails the containers not ready within the start limit, each with its fault', async () => {
      const v = await version(1);
      const m = await machine();
      const placedAt = (id: string, secondsAgo: number) =>
        db.query(`UPDATE containers SET created_at = now() - make_interval(secs => $2) WHERE id = $1`, [id, secondsAgo]);
      const late = await container(v.id, m, 'scheduled');
      const lateStarting = await container(v.id, m, 'starting');
      const young = await container(v.id, m, 'scheduled');
      const ready = await container(v.id, m, 'running', new Date());
      for (const id of [late, lateStarting, ready]) await placedAt(id, 301);
      await placedAt(young, 100);
      const failed = await containers.failStartsPastLimit(300);
      expect(failed.map((c) => c.id).sort()).toEqual([late, lateStarting].sort());
      expect(await row(late)).toMatchObject({
        state: 'failed',
        stateReason: `not ready within 300 s of its placement on machine ${m} (the start limit; last state scheduled)`,
      });
      expect((await row(lateStarting)).stateReason).toMatch(/last state starting\)$/);
      expect((await row(young)).state).toBe('scheduled');
      expect((await row(ready)).state).toBe('running');
      expect(await faultsOf(late, lateStarting, young, ready)).toEqual(
        [
          [late, m, 'start-not-ready', false],
          [lateStarting, m, 'start-not-ready', false],
        ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
      );
      expect(await containers.failStartsPastLimit(300)).toEqual([]);
      // A version whose spec gives a model server longer (startup_timeout) gets that plus 180 s.
      const slow = await version(1, { startupTimeoutSeconds: 600 });
      const loading = await container(slow.id, m, 'starting');
      await placedAt(loading, 700);
      expect(await containers.failStartsPastLimit(300)).toEqual([]);
      await placedAt(loading, 781);
      expect(await containers.failStartsPastLimit(300)).toEqual([
        {
          id: loading,
          machineId: m,
          stateReason: `not ready within 780 s of its placement on machine ${m} (the start limit; last state starting)`,
        },
      ]);
    });

    it('fails a refused start only while the container is still scheduled', async () => {
      const v = await version(1);
      const m = await machine();
      const scheduled = await container(v.id, m, 'scheduled');
      const running = await container(v.id, m, 'running');
      await containers.markStartFailed(scheduled, 'refused');
      await containers.markStartFailed(running, 'refused');
      expect(await row(scheduled)).toMatchObject({ state: 'failed', stateReason: 'refused' });
      expect(await row(running)).toMatchObject({ state: 'running', stateReason: null });
      // A refusal is an answer: no fault. An unanswered start is the machine's, once.
      const unanswered = await container(v.id, m, 'scheduled');
      await containers.markStartFailed(unanswered, 'start on machine m failed: timed out', 'start-unanswered');
      await containers.markStartFailed(unanswered, 'start on machine m failed: timed out', 'start-unanswered');
      expect(await faultsOf(scheduled, running, unanswered)).toEqual([[unanswered, m, 'start-unanswered', false]]);
    });

    it('moves an active container to stopping once, naming its machine', async () => {
      const v = await version(1);
      const m = await machine();
      const id = await container(v.id, m, 'running');
      expect(await containers.markStopping(id, 'scale-down', ACTIVE)).toEqual({ machineId: m });
      expect(await containers.markStopping(id, 'scale-down', ACTIVE)).toBeUndefined();
      expect(await row(id)).toMatchObject({ state: 'stopping', stateReason: 'scale-down' });
    });

    it("sets and clears the version's placement reason", async () => {
      const v = await version(1);
      await containers.setPlacementReason(v.id, 'no room');
      expect((await db.getRepository(DeploymentVersion).findOneByOrFail({ id: v.id })).placementReason).toBe('no room');
      await containers.setPlacementReason(v.id, null);
      expect((await db.getRepository(DeploymentVersion).findOneByOrFail({ id: v.id })).placementReason).toBeNull();
    });

    it('runs work under the version lock, and skips it while another holder has the lock', async () => {
      const v = await version(1);
      const other = await version(1);
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let entered!: () => void;
      const inside = new Promise<void>((r) => (entered = r));
      const first = containers.withVersionLock(v.id, async () => {
        entered();
        await held;
      });
      await inside;
      let ran = false;
      expect(await containers.withVersionLock(v.id, async () => void (ran = true))).toBe(false);
      expect(ran).toBe(false);
      expect(await containers.withVersionLock(other.id, async () => void (ran = true))).toBe(true);
      expect(ran).toBe(true);
      release();
      expect(await first).toBe(true);
      expect(await containers.withVersionLock(v.id, async () => undefined)).toBe(true);
    });
  });

  describe('desired state', () => {
    it('applies a scale command only if it is newer than the one applied', async () => {
      const v = await version(0);
      const cmd = {
        deploymentId: v.deploymentId,
        deploymentVersion: 1,
        desired: 3,
        reason: 'backlog',
        issuedAt: '2026-01-01T00:00:02Z',
        idleContainers: ['c-1'],
      };
      expect(await containers.applyDesired(cmd)).toBe(true);
      expect(await containers.applyDesired({ ...cmd, desired: 1, issuedAt: '2026-01-01T00:00:01Z' })).toBe(false);
      expect(await containers.applyDesired({ ...cmd, desired: 1 })).toBe(false);
      expect(await db.getRepository(DeploymentVersion).findOneByOrFail({ id: v.id })).toMatchObject({
        desiredContainers: 3,
        desiredReason: 'backlog',
        idleContainers: ['c-1'],
      });
      expect(await containers.applyDesired({ ...cmd, deploymentId: randomUUID() })).toBe(false);
      expect(await containers.versionExists(v.deploymentId, 1)).toBe(true);
      expect(await containers.versionExists(v.deploymentId, 2)).toBe(false);
    });
  });

  describe('routes', () => {
    it("reads a container with its version's spec, and lists the routable ones", async () => {
      const v = await version(1, { workers: 2, concurrentRequests: 4 });
      const m = await machine();
      const ready = await container(v.id, m, 'running', new Date('2026-01-01T00:00:00Z'));
      const starting = await container(v.id, m, 'running');
      expect(await containers.routeSourceOf(ready)).toEqual({
        id: ready,
        machineId: m,
        state: 'running',
        readyAt: new Date('2026-01-01T00:00:00Z'),
        deploymentId: v.deploymentId,
        version: 1,
        spec: { workers: 2, concurrentRequests: 4 },
      });
      expect(await containers.routeSourceOf('c-none')).toBeUndefined();
      const routable = (await containers.routable()).map((r) => r.id);
      expect(routable).toContain(ready);
      expect(routable).not.toContain(starting);
    });
  });

  describe('placement', () => {
    it("reads the pool's machines with what they hold and the pool minimum, and inserts the placed container", async () => {
      const pool = `p-${randomUUID().slice(0, 8)}`;
      await db.getRepository(Pool).save({ name: pool, minReputation: 0.7 });
      const m = `m-${randomUUID()}`;
      await db.getRepository(Machine).save({
        id: m,
        pool,
        state: 'ready',
        cpuThreads: 8,
        memoryBytes: 64 * 2 ** 30,
        gpus: [{ index: 0, model: 'H100', memoryBytes: 80 * 2 ** 30 }],
      });
      const v = await version(1);
      await containers.transaction(async (tx) => {
        expect(await tx.lockMachinesOfPool(pool)).toEqual([
          {
            id: m,
            pool,
            state: 'ready',
            cpuThreads: 8,
            memoryBytes: 64 * 2 ** 30,
            gpus: [{ index: 0, model: 'H100', memoryBytes: 80 * 2 ** 30 }],
            // A new machine has proven nothing yet.
            verification: 'unverified',
          },
        ]);
        expect(await tx.poolMinReputation(pool)).toBe(0.7);
        expect(await tx.poolMinReputation(DEFAULT_POOL)).toBeUndefined();
        await tx.insertScheduled({
          id: 'c-placed',
          deploymentVersionId: v.id,
          machineId: m,
          reason: 'scale-up',
          requested: { ...requested, gpuCount: 1, gpuIndexes: [0] },
        });
        expect(await tx.resourcesHeldOn([m], ['scheduled'])).toEqual([
          { machineId: m, requested: { ...requested, gpuCount: 1, gpuIndexes: [0] } },
        ]);
      });
      expect(await row('c-placed')).toMatchObject({ state: 'scheduled', stateReason: 'scale-up', machineId: m });
      expect(await containers.resourcesHeldOn([m], ['running'])).toEqual([]);
    });

    it('names the machines where a container of the image has started, never one where it only was placed', async () => {
      const image = `r.example.com/team/model@sha256:${randomUUID().replace(/-/g, '').padEnd(64, '0')}`;
      const ran = await machine();
      const placedOnly = await machine();
      const otherImage = await machine();
      const v = await version(1, { image });
      const started = await container(v.id, ran, 'stopped');
      await db.getRepository(Container).update({ id: started }, { startedAt: new Date() });
      await container(v.id, placedOnly, 'scheduled');
      const w = await version(1, { image: 'host' });
      const elsewhere = await container(w.id, otherImage, 'running');
      await db.getRepository(Container).update({ id: elsewhere }, { startedAt: new Date() });
      expect(await containers.machinesThatRanImage([ran, placedOnly, otherImage], image)).toEqual([ran]);
      expect(await containers.machinesThatRanImage([placedOnly], image)).toEqual([]);
    });

    it("holds the pool's machine rows until the placing transaction ends", async () => {
      const pool = `p-${randomUUID().slice(0, 8)}`;
      await db.getRepository(Pool).save({ name: pool });
      await db.getRepository(Machine).save({ id: `m-${randomUUID()}`, pool, state: 'ready' });
      const order: string[] = [];
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const haveLock = new Promise<void>((r) => (locked = r));
      const first = containers.transaction(async (tx) => {
        await tx.lockMachinesOfPool(pool);
        locked();
        await held;
        order.push('first commits');
      });
      await haveLock;
      const second = containers.transaction(async (tx) => {
        await tx.lockMachinesOfPool(pool);
        order.push('second locked');
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(order).toEqual([]);
      release();
      await Promise.all([first, second]);
      expect(order).toEqual(['first commits', 'second locked']);
    });

    it("bumps a machine's generation on every change placement reads, and on no other", async () => {
      const pool = `p-${randomUUID().slice(0, 8)}`;
      await db.getRepository(Pool).save({ name: pool });
      const m = await machine('ready', pool);
      const other = await machine('ready', pool);
      const generation = async () => (await containers.machineGenerations(pool)).find((g) => g.id === m)!.generation;
      const bumps = async (change: () => Promise<unknown>) => {
        const before = await generation();
        await change();
        return (await generation()) - before;
      };
      const v = await version(1);
      const c = `c-${randomUUID()}`;
      expect(
        await bumps(() => containers.insertScheduled({ id: c, deploymentVersionId: v.id, machineId: m, reason: 'scale-up', requested })),
      ).toBe(1);
      expect(await bumps(() => db.getRepository(Container).update({ id: c }, { state: 'stopped' }))).toBe(1);
      expect(await bumps(() => db.getRepository(Container).update({ id: c }, { stateReason: 'not read by placement' }))).toBe(0);
      expect(await bumps(() => db.getRepository(Machine).update({ id: m }, { lastHeartbeatAt: new Date() }))).toBe(0);
      expect(await bumps(() => db.getRepository(Machine).update({ id: m }, { state: 'unschedulable' }))).toBe(1);
      expect(await bumps(() => db.getRepository(Machine).update({ id: m }, { cpuThreads: 4 }))).toBe(1);
      expect(await bumps(() => db.getRepository(Container).delete({ id: c }))).toBe(1);
      expect(await containers.placementMachines([m])).toEqual([
        expect.objectContaining({ id: m, pool, state: 'unschedulable', cpuThreads: 4, generation: await generation() }),
      ]);
      await containers.transaction(async (tx) => {
        expect((await tx.lockMachines([other, m])).map((g) => g.id)).toEqual([m, other].sort());
      });
    });

    it('rolls the whole placement back when the work fails', async () => {
      const v = await version(1);
      const m = await machine();
      await expect(
        containers.transaction(async (tx) => {
          await tx.insertScheduled({ id: 'c-rolled-back', deploymentVersionId: v.id, machineId: m, reason: 'scale-up', requested });
          throw new Error('start refused');
        }),
      ).rejects.toThrow('start refused');
      expect(await db.getRepository(Container).findOneBy({ id: 'c-rolled-back' })).toBeNull();
    });
  });
});
