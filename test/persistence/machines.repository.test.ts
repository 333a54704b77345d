import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { DEFAULT_POOL, isUniqueViolation, Machine, MachinesRepository, MachineVerificationRepository, Pool } from '#tern/persistence';
import { type ContainerState } from '#tern/contracts';
import { migratedDatabase } from '../support/database.js';
import { insertContainers, insertDeployment, insertWorkspace } from '../support/rows.js';

const database = migratedDatabase('machines-repo');
let db: DataSource;
let machines: MachinesRepository;
let verification: MachineVerificationRepository;

beforeAll(async () => {
  db = database.db;
  machines = new MachinesRepository(db);
  verification = new MachineVerificationRepository(db);
});

const id = () => `m-${randomUUID()}`;
const row = (machineId: string) => db.getRepository(Machine).findOneByOrFail({ id: machineId });
const inHour = () => new Date(Date.now() + 3600_000);

async function machine(fields: Partial<Machine> = {}): Promise<string> {
  const machineId = fields.id ?? id();
  await db.getRepository(Machine).save({ id: machineId, pool: DEFAULT_POOL, state: 'ready', ...fields });
  return machineId;
}

/** Puts a machine's last heartbeat (or, with null, its registration) `seconds` in the past. */
async function silentFor(machineId: string, seconds: number, heartbeat = true): Promise<void> {
  const column = heartbeat ? 'last_heartbeat_at' : 'registered_at';
  await db.query(`UPDATE machines SET ${column} = now() - make_interval(secs => $2) WHERE id = $1`, [machineId, seconds]);
}

const inventory = {
  hostname: 'box',
  cpuModel: 'EPYC',
  cpuCores: 8,
  cpuThreads: 16,
  memoryBytes: 64 * 2 ** 30,
  gpus: [{ index: 0, model: 'NVIDIA H100', memoryBytes: 80 * 2 ** 30 }],
  disks: [{ mount: '/', fsType: 'ext4', sizeBytes: 100, freeBytes: 50 }],
  os: { platform: 'linux', distro: 'debian', release: '12', kernel: '6.1', arch: 'x64' },
  interfaces: [{ name: 'eth0', addresses: ['10.0.0.2'], speedMbps: 1000 }],
};

describe('MachinesRepository', () => {
  describe('the machines API', () => {
    it('creates a pending machine once, finds it by id and join token, lists and removes it', async () => {
      const machineId = id();
      await machines.createPending({ id: machineId, pool: DEFAULT_POOL, joinTokenHash: `h-${machineId}`, joinTokenExpiresAt: inHour() });
      const again = machines.createPending({ id: machineId, pool: DEFAULT_POOL, joinTokenHash: 'other', joinTokenExpiresAt: inHour() });
      expect(isUniqueViolation(await again.catch((e: unknown) => e), 'pk_machines')).toBe(true);

      expect(await machines.findById(machineId)).toMatchObject({ id: machineId, state: 'pending' });
      expect((await machines.findByJoinTokenHash(`h-${machineId}`))?.id).toBe(machineId);
      expect(await machines.findByJoinTokenHash('nothing')).toBeNull();
      expect((await machines.list({ state: 'pending' })).map((m) => m.id)).toContain(machineId);
      expect((await machines.list({ state: 'ready' })).map((m) => m.id)).not.toContain(machineId);

      expect(await machines.remove(machineId)).toBe(true);
      expect(await machines.remove(machineId)).toBe(false);
      expect(await machines.findById(machineId)).toBeNull();
    });

    it('lists by pool, then id', async () => {
      const pool = `p-${randomUUID().slice(0, 8)}`;
      await db.getRepository(Pool).save({ name: pool });
      const [b, a] = [await machine({ id: `b-${randomUUID()}`, pool }), await machine({ id: `a-${randomUUID()}`, pool })];
      expect((await machines.list({ pool })).map((m) => m.id)).toEqual([a, b]);
    });
    it('lists the machines that ran a container of a workspace, and no other', async () => {
      const [ran, runs, elsewhere] = [await machine(), await machine(), await machine()];
      const workspace = async () => {
        const workspaceId = await insertWorkspace(db);
        return { workspaceId, ...(await insertDeployment(db, { workspaceId, name: 'app' })) };
      };
      const container = (versionId: string, machineId: string | null, state: ContainerState) =>
        insertContainers(db, { id: `c-${randomUUID()}`, versionId, machineId, state });
      const a = await workspace();
      const b = await workspace();
      await container(a.versionId, ran, 'stopped');
      await container(a.versionId, runs, 'running');
      await container(a.versionId, runs, 'stopped');
      await container(a.versionId, null, 'pending');
      await container(b.versionId, elsewhere, 'running');
      expect((await machines.idsUsedByWorkspace(a.workspaceId)).sort()).toEqual([ran, runs].sort());
      expect(await machines.idsUsedByWorkspace(b.workspaceId)).toEqual([elsewhere]);
      expect(await machines.idsUsedByWorkspace(randomUUID())).toEqual([]);
    });
  });

  describe('registration', () => {
    it('redeems a join token once, and never an expired one', async () => {
      const fresh = await machine({ state: 'pending', joinTokenHash: `j-${randomUUID()}`, joinTokenExpiresAt: inHour() });
      expect(await machines.redeemJoinToken(fresh, 'cred-1')).toBe(true);
      expect(await machines.redeemJoinToken(fresh, 'cred-2')).toBe(false);
      expect((await machines.findByCredentialHash('cred-1'))?.id).toBe(fresh);
      expect(await machines.findByCredentialHash('cred-2')).toBeNull();
      expect(await machines.joinTokenStatus(fresh)).toEqual({
        usedAt: expect.any(Date),
        expiresAt: expect.any(Date),
        now: expect.any(Date),
      });

      const expired = await machine({
        state: 'pending',
        joinTokenHash: `j-${randomUUID()}`,
        joinTokenExpiresAt: new Date(Date.now() - 1000),
      });
      expect(await machines.redeemJoinToken(expired, 'cred-3')).toBe(false);
      expect((await machines.joinTokenStatus(expired))?.usedAt).toBeNull();
      expect(await machines.joinTokenStatus('m-none')).toBeUndefined();
    });

    it('lets concurrent redemptions of one join token succeed once', async () => {
      const machineId = await machine({ state: 'pending', joinTokenHash: `j-${randomUUID()}`, joinTokenExpiresAt: inHour() });
      const results = await Promise.all(Array.from({ length: 5 }, (_, i) => machines.redeemJoinToken(machineId, `cred-${machineId}-${i}`)));
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    it('creates a machine with a credential, never replacing the credential of an existing one', async () => {
      const machineId = id();
      expect(await machines.insertWithCredential(machineId, DEFAULT_POOL, `c1-${machineId}`)).toBe(true);
      expect(await row(machineId)).toMatchObject({ state: 'pending', credentialHash: `c1-${machineId}`, joinTokenUsedAt: null });
      expect(await machines.insertWithCredential(machineId, DEFAULT_POOL, `c2-${machineId}`)).toBe(false);
      expect(await row(machineId)).toMatchObject({ credentialHash: `c1-${machineId}` });

      const joining = await machine({ state: 'pending', joinTokenHash: `j-${randomUUID()}`, joinTokenExpiresAt: inHour() });
      expect(await machines.insertWithCredential(joining, DEFAULT_POOL, `c3-${joining}`)).toBe(false);
      expect(await row(joining)).toMatchObject({ credentialHash: null, joinTokenUsedAt: null });
    });

    it('stores the inventory and moves the machine to registered under its row lock', async () => {
      const machineId = await machine({ state: 'pending' });
      const registered = await machines.transaction(async (tx) => {
        expect(await tx.lockState(machineId)).toBe('pending');
        expect(await tx.storeInventory(machineId, inventory, '1.2.3')).toEqual({ pool: DEFAULT_POOL, registeredAt: expect.any(Date) });
        return tx.markRegistered(machineId, 'agent registered');
      });
      expect(registered).toBeInstanceOf(Date);
      expect(await row(machineId)).toMatchObject({
        state: 'registered',
        stateReason: 'agent registered',
        stateChangedAt: registered,
        hostname: 'box',
        cpuThreads: 16,
        memoryBytes: 64 * 2 ** 30,
        gpus: inventory.gpus,
        os: inventory.os,
        network: { interfaces: inventory.interfaces },
        agentVersion: '1.2.3',
      });
      expect(await machines.lockState('m-none')).toBeUndefined();
      expect(await machines.storeInventory('m-none', inventory, '1')).toBeUndefined();
    });
  });

  describe('the registry', () => {
    it("records a heartbeat of a known machine, with its pool's rules", async () => {
      const pool = `p-${randomUUID().slice(0, 8)}`;
      await db.getRepository(Pool).save({ name: pool, allowedGpuTypes: ['H100'], minNetworkMbps: 100 });
      const machineId = await machine({ pool, state: 'registered', agentVersion: '1.0.0' });
      const other = await machine({ state: 'ready', agentVersion: '1.0.0' });
      // A batch: unknown machines are left out of the answer, each known one with its pool's rules.
      const recorded = await machines.transaction((tx) =>
        tx.recordHeartbeats([
          { machineId, agentVersion: null },
          { machineId: 'm-none', agentVersion: null },
          { machineId: other, agentVersion: '1.1.0' },
        ]),
      );
      expect(recorded.find((m) => m.id === machineId)).toEqual({
        id: machineId,
        pool,
        state: 'registered',
        stateReason: null,
        gpus: [],
        network: null,
        allowedGpuTypes: ['H100'],
        minNetworkMbps: 100,
      });
      expect(recorded.map((m) => m.id).sort()).toEqual([machineId, other].sort());
      expect(await row(machineId)).toMatchObject({ lastHeartbeatAt: expect.any(Date), agentVersion: '1.0.0' });
      expect(await row(other)).toMatchObject({ lastHeartbeatAt: expect.any(Date), agentVersion: '1.1.0' });
    });

    it("leaves a beat's time out of every index, so a heartbeat's update stays on its page (HOT)", async () => {
      // Each beat rewrites machines.last_heartbeat_at and reputation_machines.heartbeat_at: an index
      // on either made every beat write an entry into every index of its table (bench/agents README).
      const indexed = await db.query<{ table: string; column: string }>(
        `SELECT t.relname AS table, a.attname AS column FROM pg_index i
         JOIN pg_class t ON t.oid = i.indrelid JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = ANY(i.indkey)
         WHERE (t.oid, a.attname) IN (('machines'::regclass, 'last_heartbeat_at'), ('reputation_machines'::regclass, 'heartbeat_at'))`,
      );
      expect(indexed).toEqual([]);
      const fillfactors = await db.query<{ table: string; options: string[] | null }>(
        `SELECT relname AS table, reloptions AS options FROM pg_class
         WHERE oid IN ('machines'::regclass, 'reputation_machines'::regclass) ORDER BY relname`,
      );
      expect(fillfactors).toEqual([
        { table: 'machines', options: ['fillfactor=80'] },
        { table: 'reputation_machines', options: ['fillfactor=80'] },
      ]);
    });

    it('keeps only a newer network test', async () => {
      const machineId = await machine();
      const test = (testedAt: string, mbps: number) => ({
        nats: { throughputMbps: mbps, latencyMs: 1 },
        http: { throughputMbps: mbps, latencyMs: 1 },
        testedAt,
      });
      expect((await machines.recordNetworkTest(machineId, test('2026-01-01T00:00:02Z', 500)))?.network?.test?.nats.throughputMbps).toBe(
        500,
      );
      expect(await machines.recordNetworkTest(machineId, test('2026-01-01T00:00:01Z', 5))).toBeUndefined();
      expect((await machines.recordNetworkTest(machineId, test('2026-01-01T00:00:03Z', 50)))?.network?.test?.nats.throughputMbps).toBe(50);
      expect((await row(machineId)).network?.test?.testedAt).toBe('2026-01-01T00:00:03Z');
      expect(await machines.recordNetworkTest('m-none', test('2026-01-01T00:00:04Z', 1))).toBeUndefined();
    });

    it('moves a machine only from the state the caller saw', async () => {
      const machineId = await machine({ state: 'registered' });
      expect(await machines.moveState(machineId, 'offline', 'ready', 'first heartbeat')).toBeUndefined();
      expect((await row(machineId)).state).toBe('registered');
      expect(await machines.moveState(machineId, 'registered', 'ready', 'first heartbeat')).toEqual({
        pool: DEFAULT_POOL,
        changedAt: expect.any(Date),
      });
      expect(await row(machineId)).toMatchObject({ state: 'ready', stateReason: 'first heartbeat' });
      await machines.setStateReason(machineId, 'still fine');
      expect(await row(machineId)).toMatchObject({ state: 'ready', stateReason: 'still fine' });
    });

    it("rolls a move and its outbox row back when the transaction's work fails", async () => {
      const machineId = await machine({ state: 'registered' });
      await expect(
        machines.transaction(async (tx) => {
          await tx.moveState(machineId, 'registered', 'ready', 'first heartbeat');
          throw new Error('database gone');
        }),
      ).rejects.toThrow('database gone');
      expect((await row(machineId)).state).toBe('registered');
      expect(await db.query(`SELECT 1 FROM machine_state_outbox WHERE machine_id = $1`, [machineId])).toEqual([]);
    });
  });

  describe('the offline sweep', () => {
    it('moves each silent machine offline once, and no other', async () => {
      const silent = await machine({ state: 'ready' });
      await silentFor(silent, 120);
      const neverBeat = await machine({ state: 'registered' });
      await silentFor(neverBeat, 120, false);
      const alive = await machine({ state: 'ready' });
      await silentFor(alive, 1);
      const pending = await machine({ state: 'pending' });
      await silentFor(pending, 120);

      const swept = await machines.markOfflineOlderThan(30);
      const byId = new Map(swept.map((m) => [m.id, m]));
      expect(byId.get(silent)).toEqual({
        id: silent,
        pool: DEFAULT_POOL,
        from: 'ready',
        reason: expect.stringMatching(/^no heartbeat for 30 s \(last at .*Z\)$/),
        changedAt: expect.any(Date),
      });
      expect(byId.get(neverBeat)).toMatchObject({ from: 'registered', reason: 'no heartbeat within 30 s of registering' });
      expect(byId.has(alive)).toBe(false);
      expect(byId.has(pending)).toBe(false);
      expect(await row(silent)).toMatchObject({ state: 'offline' });
      expect((await row(alive)).state).toBe('ready');

      const again = await machines.markOfflineOlderThan(30);
      expect(again.map((m) => m.id)).not.toContain(silent);
      expect(again.map((m) => m.id)).not.toContain(neverBeat);
    });

    it('skips the machines another sweep holds, so two sweeps never move one machine twice', async () => {
      const ids = [await machine(), await machine(), await machine()];
      for (const m of ids) await silentFor(m, 120);
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let swept!: (ids: string[]) => void;
      const firstSwept = new Promise<string[]>((r) => (swept = r));
      const first = machines.transaction(async (tx) => {
        swept((await tx.markOfflineOlderThan(30)).map((m) => m.id));
        await held;
      });
      const firstIds = await firstSwept;
      expect(firstIds).toEqual(expect.arrayContaining(ids));
      // The first sweep has not committed: its rows are locked, and the second skips them.
      const second = await machines.transaction((tx) => tx.markOfflineOlderThan(30));
      expect(second.map((m) => m.id).filter((m) => ids.includes(m))).toEqual([]);
      release();
      await first;
      expect(await machines.markOfflineOlderThan(30)).toEqual([]);
    });

    it('leaves a machine whose heartbeat is being recorded for the next sweep', async () => {
      const machineId = await machine();
      await silentFor(machineId, 120);
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let beat!: () => void;
      const beating = new Promise<void>((r) => (beat = r));
      const heartbeat = machines.transaction(async (tx) => {
        await tx.recordHeartbeats([{ machineId, agentVersion: null }]);
        beat();
        await held;
      });
      await beating;
      expect((await machines.markOfflineOlderThan(30)).map((m) => m.id)).not.toContain(machineId);
      release();
      await heartbeat;
      expect((await machines.markOfflineOlderThan(30)).map((m) => m.id)).not.toContain(machineId);
      expect((await row(machineId)).state).toBe('ready');
    });
  });
});

/** A registered, heartbeating machine; its claims as the verifier reads them. */
async function registered(state: 'ready' | 'offline' = 'ready'): Promise<string> {
  const id = await machine({ state });
  await machines.storeInventory(id, inventory, '1');
  return id;
}

describe('MachineVerificationRepository', () => {
  it('hands a due machine to one verifier at a time, and only heartbeating ones', async () => {
    const [live, gone] = [await registered(), await registered('offline')];
    const first = await verification.claimDue(1000, 60_000);
    const ids = first.map((m) => m.id);
    expect(ids).toContain(live);
    expect(ids).not.toContain(gone);
    expect(first.find((m) => m.id === live)).toMatchObject({
      cpuModel: 'EPYC',
      cpuThreads: 16,
      gpus: inventory.gpus,
      verification: 'unverified',
    });
    expect((await verification.claimDue(1000, 60_000)).map((m) => m.id)).not.toContain(live);
  });

  it("stores a verdict and the next challenge's time, the generation bumped when the state changes", async () => {
    const id = await registered();
    const [claimed] = (await verification.claimDue(1000, 60_000)).filter((m) => m.id === id);
    const generation = (await row(id)).generation;
    expect(await verification.record(claimed!, { state: 'quarantined', reason: 'GPU 0 too slow' }, 3_600_000)).toBe('unverified');
    const after = await row(id);
    expect(after).toMatchObject({
      verification: 'quarantined',
      verificationReason: 'GPU 0 too slow',
      verificationCheckedAt: expect.any(Date),
    });
    expect(after.verificationDueAt.getTime()).toBeGreaterThan(Date.now() + 3_000_000);
    expect(after.generation).toBeGreaterThan(generation);
    expect(await verification.record(claimed!, { state: 'verified', reason: 'proved' }, 1000)).toBe('quarantined');
  });

  it('drops a verdict on claims the machine no longer makes, and makes a changed inventory unverified and due now', async () => {
    const id = await registered();
    const [claimed] = (await verification.claimDue(1000, 60_000)).filter((m) => m.id === id);
    await verification.record(claimed!, { state: 'verified', reason: 'proved' }, 3_600_000);
    // Registering the same inventory again changes nothing.
    await machines.storeInventory(id, inventory, '1');
    expect(await row(id)).toMatchObject({ verification: 'verified' });
    // Eight GPUs now: what was proven was another claim.
    const eight = {
      ...inventory,
      gpus: Array.from({ length: 8 }, (_, index) => ({ index, model: 'NVIDIA H100', memoryBytes: 80 * 2 ** 30 })),
    };
    await machines.storeInventory(id, eight, '1');
    const changed = await row(id);
    expect(changed).toMatchObject({ verification: 'unverified', verificationReason: 'inventory changed: to be challenged' });
    expect(changed.verificationDueAt.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    // A challenge drawn from the old claim lands nowhere.
    expect(await verification.record(claimed!, { state: 'verified', reason: 'proved one GPU' }, 1000)).toBeUndefined();
    expect(await row(id)).toMatchObject({ verification: 'unverified' });
  });

  it("counts the GPUs its own rows put to work on a machine, and puts off a challenge keeping the machine's state", async () => {
    const id = await registered();
    const workspaceId = await insertWorkspace(db);
    const { versionId } = await insertDeployment(db, { workspaceId, name: `gpu-work-${id}` });
    const gpu = (n: number) => ({ cpuMillicores: 1000, memoryBytes: 2 ** 30, gpuCount: n });
    await insertContainers(
      db,
      { id: `${id}-run`, versionId, machineId: id, state: 'running', requested: gpu(1) },
      { id: `${id}-cpu`, versionId, machineId: id, state: 'running', requested: gpu(0) },
      { id: `${id}-gone`, versionId, machineId: id, state: 'stopped', requested: gpu(4) },
    );
    await db.query(
      `INSERT INTO sandboxes (id, workspace_id, machine_id, pool, state, spec, requested, timeout_seconds)
       VALUES ($1, $2, $3, 'default', 'running', '{}', $4::jsonb, 60), ($5, $2, $3, 'default', 'stopped', '{}', $4::jsonb, 60)`,
      [`${id}-sbx`, workspaceId, id, JSON.stringify(gpu(2)), `${id}-sbx-gone`],
    );
    const [claimed] = (await verification.claimDue(1000, 60_000)).filter((m) => m.id === id);
    expect(claimed).toMatchObject({ gpusInUse: 3, checkedAt: null });

    await verification.record(claimed!, { state: 'verified', reason: 'proved' }, 0);
    const before = await row(id);
    await verification.defer(id, 600_000);
    const after = await row(id);
    expect(after).toMatchObject({
      verification: 'verified',
      verificationReason: 'proved',
      verificationCheckedAt: before.verificationCheckedAt,
    });
    expect(after.verificationDueAt.getTime()).toBeGreaterThan(Date.now() + 590_000);
  });

  it('counts machines per pool and state', async () => {
    const counts = await verification.countByPoolAndVerification();
    expect(counts.find((c) => c.pool === DEFAULT_POOL && c.verification === 'unverified')?.count).toBeGreaterThan(0);
  });
});
