import { QueryFailedError } from 'typeorm';
import { type ApiToken, TokensRepository, type Workspace } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { AuthService } from '../auth/auth.service.js';
import type { Principal } from '../auth/principal.js';
import { WorkspacesService } from './workspaces.service.js';

const admin: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 't1', role: 'admin' };
const operator: Principal = { ...admin, role: 'operator' };
const taken = new QueryFailedError('INSERT', [], Object.assign(new Error('dup'), { code: '23505', constraint: 'uq_workspaces_name' }));

async function workspaces() {
  const { sut, fake } = await newTestService(WorkspacesService);
  const auth = fake(AuthService);
  auth.issue.mockImplementation(async (workspaceId, name, role) => ({
    token: 'tern_x',
    row: { id: 'new', workspaceId, name, role } as ApiToken,
  }));
  return { sut, tokens: fake(TokensRepository), auth };
}

describe('WorkspacesService', () => {
  it('makes a workspace with its first admin token', async () => {
    const { sut, tokens, auth } = await workspaces();
    tokens.createWorkspace.mockResolvedValue({ id: 'w9', name: 'lab' } as Workspace);
    expect(await sut.create('lab')).toEqual({ workspace: { id: 'w9', name: 'lab' }, token: 'tern_x', tokenId: 'new' });
    expect(auth.issue).toHaveBeenCalledWith('w9', 'admin', 'admin');
  });

  it("refuses a taken name with a 409, saying when a deleted workspace's name is not given again", async () => {
    const { sut, tokens, auth } = await workspaces();
    tokens.createWorkspace.mockRejectedValue(taken);
    tokens.findWorkspaceByName.mockResolvedValueOnce({ deletedAt: null } as Workspace);
    await expect(sut.create('lab')).rejects.toMatchObject({ status: 409, message: 'workspace "lab" already exists' });
    tokens.findWorkspaceByName.mockResolvedValueOnce({ deletedAt: new Date('2026-01-01T00:00:00Z') } as Workspace);
    await expect(sut.create('lab')).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/was deleted at 2026-01-01T00:00:00.000Z; its name is not given again/),
    });
    expect(auth.issue).not.toHaveBeenCalled();
  });

  it('lets only an operator make an operator token (403), and refuses an expiry not in the future (400)', async () => {
    const { sut, auth } = await workspaces();
    await expect(sut.createToken(admin, 'ops', 'operator')).rejects.toMatchObject({ status: 403 });
    await expect(sut.createToken(admin, 'ci', 'member', 'yesterday')).rejects.toMatchObject({
      status: 400,
      message: 'expiresAt "yesterday" is not a date-time',
    });
    await expect(sut.createToken(admin, 'ci', 'member', '2000-01-01T00:00:00Z')).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/is not in the future$/),
    });
    expect(auth.issue).not.toHaveBeenCalled();
    await sut.createToken(operator, 'ops', 'operator');
    expect(auth.issue).toHaveBeenCalledWith('w1', 'ops', 'operator', null);
  });

  it("revokes a token of the caller's workspace only, an operator's only by an operator, and forgets it at once", async () => {
    const { sut, tokens, auth } = await workspaces();
    tokens.findInWorkspace.mockResolvedValueOnce(null);
    await expect(sut.revokeToken(admin, 'theirs')).rejects.toMatchObject({
      status: 404,
      message: 'token theirs not found in this workspace',
    });
    expect(tokens.findInWorkspace).toHaveBeenCalledWith('theirs', 'w1');
    tokens.findInWorkspace.mockResolvedValueOnce({ id: 'op1', role: 'operator', revokedAt: null } as ApiToken);
    await expect(sut.revokeToken(admin, 'op1')).rejects.toMatchObject({ status: 403 });
    tokens.findInWorkspace.mockResolvedValueOnce({ id: 'gone', role: 'member', revokedAt: new Date() } as ApiToken);
    await expect(sut.revokeToken(admin, 'gone')).rejects.toMatchObject({ status: 404 });
    expect(tokens.revoke).not.toHaveBeenCalled();
    tokens.findInWorkspace.mockResolvedValueOnce({ id: 'm1', role: 'member', revokedAt: null } as ApiToken);
    await sut.revokeToken(admin, 'm1');
    expect(tokens.revoke).toHaveBeenCalledWith('m1');
    expect(auth.forget).toHaveBeenCalledWith('m1');
  });
});
