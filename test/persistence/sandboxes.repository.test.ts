import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { ContainersRepository, DEFAULT_POOL, Machine, type NewSandbox, SandboxesRepository, Workspace } from '#tern/persistence';
import { HOLDING_STATES } from '#tern/placement';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('sandboxes-repo');
let db: DataSource;
let sandboxes: SandboxesRepository;
let containers: ContainersRepository;

beforeAll(async () => {
  db = database.db;
  sandboxes = new SandboxesRepository(db);
  containers = new ContainersRepository(db);
});

const requested = { cpuMillicores: 500, memoryBytes: 256 * 2 ** 20, gpuCount: 0 };

async function machine(state: Machine['state'] = 'ready'): Promise<string> {
  const id = `m-${randomUUID()}`;
  await db.getRepository(Machine).save({ id, pool: DEFAULT_POOL, state });
  return id;
}

async function placed(machineId: string, extra: Partial<NewSandbox> = {}): Promise<NewSandbox> {
  const ws = await db.getRepository(Workspace).save({ name: `ws-${randomUUID()}` });
  const s: NewSandbox = {
    id: `sb-${randomUUID()}`,
    workspaceId: ws.id,
    machineId,
    pool: DEFAULT_POOL,
    spec: { image: 'host' },
    requested,
    timeoutSeconds: 300,
    idleTimeoutSeconds: null,
    ...extra,
  };
  await sandboxes.insertPlaced(s);
  return s;
}

const age = (id: string, column: 'created_at' | 'active_at', seconds: number) =>
  db.query(`UPDATE sandboxes SET ${column} = now() - make_interval(secs => $2) WHERE id = $1`, [id, seconds]);

describe('SandboxesRepository', () => {
  it('moves placing → running → terminated once, and answers only its own workspace', async () => {
    const s = await placed(await machine());
    expect(await sandboxes.markRunning(s.id)).toMatchObject({ id: s.id, state: 'running' });
    expect(await sandboxes.markRunning(s.id)).toBeUndefined();
    expect(await sandboxes.touch(s.id)).toBe(true);
    expect(await sandboxes.exposePort(s.id, 8000)).toEqual([8000]);
    expect(await sandboxes.exposePort(s.id, 8000)).toEqual([8000]);
    expect(await sandboxes.findOfWorkspace(randomUUID(), s.id)).toBeUndefined();
    expect(await sandboxes.listOfWorkspace(s.workspaceId, true, 10)).toHaveLength(1);

    const ended = await sandboxes.end(s.id, 'terminated', 'deleted');
    expect(ended).toMatchObject({ id: s.id, state: 'terminated', reason: 'deleted', workspaceId: s.workspaceId, requested });
    expect(ended!.startedAt).toBeInstanceOf(Date);
    expect(await sandboxes.end(s.id, 'lost', 'again')).toBeUndefined();
    expect(await sandboxes.touch(s.id)).toBe(false);
    expect(await sandboxes.exposePort(s.id, 9000)).toBeUndefined();
    expect(await sandboxes.listOfWorkspace(s.workspaceId, true, 10)).toHaveLength(0);
    expect(await sandboxes.listOfWorkspace(s.workspaceId, false, 10)).toHaveLength(1);
  });

  it('makes a port public under one token, found by it only while the sandbox runs', async () => {
    const s = await placed(await machine());
    expect(await sandboxes.makePortPublic(s.id, 8000, 'token-a')).toBeUndefined(); // still placing
    await sandboxes.markRunning(s.id);
    expect(await sandboxes.makePortPublic(s.id, 8000, 'token-a')).toEqual({ 'token-a': 8000 });
    // The same port again keeps its first token; another port gets its own.
    expect(await sandboxes.makePortPublic(s.id, 8000, 'token-b')).toEqual({ 'token-a': 8000 });
    expect(await sandboxes.makePortPublic(s.id, 9000, 'token-c')).toEqual({ 'token-a': 8000, 'token-c': 9000 });
    expect(await sandboxes.findByPublicToken('token-c')).toMatchObject({ id: s.id, publicPorts: { 'token-a': 8000, 'token-c': 9000 } });
    expect(await sandboxes.findByPublicToken('token-b')).toBeUndefined();
    await sandboxes.end(s.id, 'terminated', 'deleted');
    expect(await sandboxes.findByPublicToken('token-a')).toBeUndefined();
  });

  it('ends those past their lifetime or idle timeout, and those on an offline or removed machine, once each', async () => {
    const ready = await machine();
    const offline = await machine('offline');
    const removed = await machine();
    const old = await placed(ready, { timeoutSeconds: 60 });
    const idle = await placed(ready, { idleTimeoutSeconds: 30 });
    const fresh = await placed(ready, { idleTimeoutSeconds: 30 });
    const stranded = await placed(offline);
    const orphan = await placed(removed);
    for (const s of [old, idle, fresh, stranded, orphan]) await sandboxes.markRunning(s.id);
    await age(old.id, 'created_at', 61);
    await age(idle.id, 'active_at', 31);
    await db.getRepository(Machine).delete(removed);

    const [first, second] = await Promise.all([sandboxes.endOverdue(), sandboxes.endOverdue()]);
    const ended = [...first, ...second].filter((e) => [old, idle, fresh, stranded, orphan].some((s) => s.id === e.id));
    const byId = new Map(ended.map((e) => [e.id, e]));
    expect(ended).toHaveLength(4);
    expect(byId.get(old.id)).toMatchObject({ state: 'terminated', reason: 'lifetime of 60 s reached' });
    expect(byId.get(idle.id)).toMatchObject({ state: 'terminated', reason: 'idle for 30 s' });
    expect(byId.get(stranded.id)).toMatchObject({ state: 'lost', reason: `machine ${offline} went offline` });
    expect(byId.get(orphan.id)).toMatchObject({ state: 'lost', reason: 'machine removed' });
    expect(byId.has(fresh.id)).toBe(false);
  });

  it("counts a live sandbox's resources on its machine for placement, and an ended one's no more", async () => {
    const m = await machine();
    const s = await placed(m);
    expect(await containers.resourcesHeldOn([m], HOLDING_STATES)).toEqual([{ machineId: m, requested }]);
    await sandboxes.markRunning(s.id);
    expect(await containers.resourcesHeldOn([m], HOLDING_STATES)).toHaveLength(1);
    await sandboxes.end(s.id, 'terminated', 'deleted');
    expect(await containers.resourcesHeldOn([m], HOLDING_STATES)).toEqual([]);
  });

  it('inserts in the transaction of another repository (placement holds the machine rows locked)', async () => {
    const m = await machine();
    const id = `sb-${randomUUID()}`;
    const ws = await db.getRepository(Workspace).save({ name: `ws-${randomUUID()}` });
    await expect(
      containers.transaction(async (tx) => {
        await tx.lockMachinesOfPool(DEFAULT_POOL);
        await tx.joining(sandboxes).insertPlaced({
          id,
          workspaceId: ws.id,
          machineId: m,
          pool: DEFAULT_POOL,
          spec: {},
          requested,
          timeoutSeconds: 300,
          idleTimeoutSeconds: null,
        });
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await sandboxes.findOfWorkspace(ws.id, id)).toBeUndefined();
  });

  it("lets a machine pull the repository of a live sandbox's image placed on it, and no other", async () => {
    const here = await machine();
    const repository = '127.0.0.1:5000/builds/ws/snapshots/s';
    const s = await placed(here, { spec: { image: `${repository}@sha256:${'a'.repeat(64)}` } });
    expect(await containers.imageRepositoryPlacedOn(here, repository)).toBe(true);
    expect(await containers.imageRepositoryPlacedOn(here, '127.0.0.1:5000/builds/ws/other')).toBe(false);
    expect(await containers.imageRepositoryPlacedOn(await machine(), repository)).toBe(false);
    await sandboxes.markRunning(s.id);
    expect(await containers.imageRepositoryPlacedOn(here, repository)).toBe(true);
    await sandboxes.end(s.id, 'terminated', 'deleted');
    expect(await containers.imageRepositoryPlacedOn(here, repository)).toBe(false);
  });
});
