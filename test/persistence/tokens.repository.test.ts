import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { ApiToken, hashToken, isUniqueViolation, TokensRepository, Workspace } from '#tern/persistence';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('tokensrepo');
let db: DataSource;
let tokens: TokensRepository;

beforeAll(async () => {
  db = database.db;
  tokens = new TokensRepository(db);
});

const secret = () => `tern_${randomUUID().replaceAll('-', '')}`;
const fields = (workspaceId: string, name = 'ci', value = secret()) => ({
  workspaceId,
  name,
  role: 'member' as const,
  tokenHash: hashToken(value),
  prefix: value.slice(0, 8),
});

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject');
}

describe('TokensRepository', () => {
  it('creates, finds and lists workspaces, refusing a taken name', async () => {
    const name = `ws-${randomUUID()}`;
    const ws = await tokens.createWorkspace(name);
    expect(ws).toMatchObject({ id: expect.any(String), name, createdAt: expect.any(Date) });
    expect(await tokens.findWorkspace(ws.id)).toMatchObject({ name });
    expect(await tokens.findWorkspace(randomUUID())).toBeNull();
    const later = await tokens.createWorkspace(`ws-${randomUUID()}`);
    const all = (await tokens.listWorkspaces()).map((w) => w.id);
    expect(all.indexOf(ws.id)).toBeLessThan(all.indexOf(later.id));
    expect(isUniqueViolation(await rejection(tokens.createWorkspace(name)), 'uq_workspaces_name')).toBe(true);
  });

  it('issues a token and finds it by its hash with its workspace, until it is revoked', async () => {
    const ws = await tokens.createWorkspace(`ws-${randomUUID()}`);
    const value = secret();
    const issued = await tokens.issue(fields(ws.id, 'ci', value));
    expect(issued).toMatchObject({
      id: expect.any(String),
      workspaceId: ws.id,
      name: 'ci',
      role: 'member',
      prefix: value.slice(0, 8),
      revokedAt: null,
      lastUsedAt: null,
    });
    const found = await tokens.findActiveByHash(hashToken(value));
    expect(found).toMatchObject({ id: issued.id, workspace: { name: ws.name } });
    expect(await tokens.findActiveByHash(hashToken(secret()))).toBeNull();
    await tokens.revoke(issued.id);
    expect(await tokens.findActiveByHash(hashToken(value))).toBeNull();
    expect((await tokens.findInWorkspace(issued.id, ws.id))?.revokedAt).toBeInstanceOf(Date);
  });

  it("deletes a workspace once: gone from reads, its name kept, its tokens revoked, another workspace's untouched", async () => {
    const name = `ws-${randomUUID()}`;
    const ws = await tokens.createWorkspace(name);
    const other = await tokens.createWorkspace(`ws-${randomUUID()}`);
    const mine = [await tokens.issue(fields(ws.id, 'a')), await tokens.issue({ ...fields(ws.id, 'op'), role: 'operator' })];
    const theirs = await tokens.issue(fields(other.id));
    expect((await tokens.activeOperatorTokens(ws.id)).map((t) => t.id)).toEqual([mine[1]!.id]);

    expect(await tokens.markWorkspaceDeleted(ws.id, 'tok-1', 60_000)).toBe(true);
    expect(await tokens.markWorkspaceDeleted(ws.id, 'tok-2', 60_000)).toBe(false);
    expect(await tokens.findWorkspace(ws.id)).toBeNull();
    expect((await tokens.listWorkspaces()).map((w) => w.id)).not.toContain(ws.id);
    expect(await tokens.findWorkspaceByName(name)).toMatchObject({ id: ws.id, deletedAt: expect.any(Date) });
    expect(isUniqueViolation(await rejection(tokens.createWorkspace(name)))).toBe(true);

    expect((await tokens.revokeAllOf(ws.id)).sort()).toEqual(mine.map((t) => t.id).sort());
    expect(await tokens.revokeAllOf(ws.id)).toEqual([]);
    expect(await tokens.listActive(ws.id)).toEqual([]);
    expect((await tokens.listActive(other.id)).map((t) => t.id)).toEqual([theirs.id]);
  });

  it("gives a deleted workspace's purge to one claimant at a time, again once its claim lapses, never once purged", async () => {
    const ws = await tokens.createWorkspace(`ws-${randomUUID()}`);
    const held = await tokens.createWorkspace(`ws-${randomUUID()}`);
    expect(await tokens.markWorkspaceDeleted(held.id, 'tok-held', 60_000)).toBe(true);
    // The deleting gateway died at once: its claim lapsed.
    expect(await tokens.markWorkspaceDeleted(ws.id, 'tok-op', 0)).toBe(true);
    const mine = (claimed: (Workspace | undefined)[]) => claimed.filter((w) => w?.id === ws.id);

    const both = await Promise.all([tokens.claimUnpurgedWorkspace(60_000), tokens.claimUnpurgedWorkspace(60_000)]);
    expect(mine(both)).toEqual([expect.objectContaining({ id: ws.id, name: ws.name, deletedBy: 'tok-op', purgedAt: null })]);
    expect(both.map((w) => w?.id)).not.toContain(held.id);
    expect(mine([await tokens.claimUnpurgedWorkspace(60_000)])).toEqual([]);

    await tokens.endWorkspacePurge(ws.id, false, 0);
    expect(mine([await tokens.claimUnpurgedWorkspace(60_000)])).toHaveLength(1);
    await tokens.endWorkspacePurge(ws.id, true, 0);
    await db.query(`UPDATE workspaces SET purge_claimed_until = NULL WHERE id = $1`, [ws.id]);
    expect(mine([await tokens.claimUnpurgedWorkspace(60_000)])).toEqual([]);
    expect(await tokens.findWorkspaceByName(ws.name)).toMatchObject({ purgedAt: expect.any(Date), deletedBy: 'tok-op' });
  });

  it('records when a token was last used', async () => {
    const ws = await tokens.createWorkspace(`ws-${randomUUID()}`);
    const issued = await tokens.issue(fields(ws.id));
    await tokens.markUsed(issued.id);
    expect((await db.getRepository(ApiToken).findOneByOrFail({ id: issued.id })).lastUsedAt).toBeInstanceOf(Date);
  });

  it('lists the workspace tokens not revoked, oldest first, and finds one only in its own workspace', async () => {
    const ws = await tokens.createWorkspace(`ws-${randomUUID()}`);
    const other = await tokens.createWorkspace(`ws-${randomUUID()}`);
    const a = await tokens.issue(fields(ws.id, 'a'));
    const b = await tokens.issue(fields(ws.id, 'b'));
    const gone = await tokens.issue(fields(ws.id, 'gone'));
    await tokens.issue(fields(other.id, 'theirs'));
    await tokens.revoke(gone.id);
    expect((await tokens.listActive(ws.id)).map((t) => t.name)).toEqual(['a', 'b']);
    expect(await tokens.findInWorkspace(a.id, other.id)).toBeNull();
    expect(await tokens.findInWorkspace(b.id, ws.id)).toMatchObject({ name: 'b' });
  });

  it('installs a workspace token once, creating the workspace, even when gateways start at once', async () => {
    const name = `boot-${randomUUID()}`;
    const value = secret();
    const token = { name: 'admin (bootstrap)', role: 'admin' as const, tokenHash: hashToken(value), prefix: value.slice(0, 8) };
    const installed = await Promise.all([1, 2, 3].map(() => tokens.ensureWorkspaceToken(name, token)));
    expect(installed.filter(Boolean)).toHaveLength(1);
    expect(await tokens.ensureWorkspaceToken(name, token)).toBe(false);
    const ws = await db.getRepository(Workspace).findOneByOrFail({ name });
    expect(await db.getRepository(ApiToken).findBy({ workspaceId: ws.id })).toEqual([
      expect.objectContaining({ role: 'admin', name: 'admin (bootstrap)' }),
    ]);
  });

  it('stores the operator role, and no role outside operator, admin and member', async () => {
    const ws = await tokens.createWorkspace(`ops-${randomUUID()}`);
    expect(await tokens.issue({ ...fields(ws.id, 'ops'), role: 'operator' })).toMatchObject({ role: 'operator' });
    const refused = await rejection(tokens.issue({ ...fields(ws.id, 'root'), role: 'root' as 'member' }));
    expect((refused as { constraint?: string }).constraint).toBe('ck_api_tokens_role');
  });
});
