import {
  DeploymentsRepository,
  SandboxesRepository,
  SecretsRepository,
  TokensRepository,
  VolumesRepository,
  type Workspace,
} from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { AuthService } from '../auth/auth.service.js';
import type { Principal } from '../auth/principal.js';
import { DeploymentsService } from '../deployments/deployments.service.js';
import { RegistryImages } from '../images/registry-images.js';
import { NatsUsersService } from '../nats-users/nats-users.service.js';
import { SandboxesService } from '../sandboxes/sandboxes.service.js';
import { VolumesService } from '../volumes/volumes.service.js';
import { PURGE_CLAIM_MS, PURGE_RETRY_MS, WorkspaceDeletion } from './workspace-deletion.service.js';

const operator: Principal = { workspaceId: 'w-ops', workspaceName: 'ops', tokenId: 'tok-op', role: 'operator' };
const team = { id: 'w1', name: 'team', deletedBy: null } as Workspace;

async function deletion() {
  const { sut, fake } = await newTestService(WorkspaceDeletion);
  const tokens = fake(TokensRepository);
  tokens.findWorkspace.mockImplementation(async (id) => (id === team.id ? team : null));
  tokens.activeOperatorTokens.mockResolvedValue([]);
  tokens.markWorkspaceDeleted.mockResolvedValue(true);
  tokens.revokeAllOf.mockResolvedValue(['t1', 't2']);
  const deploymentRows = fake(DeploymentsRepository);
  deploymentRows.listWithCounts.mockResolvedValue([{ name: 'app' }, { name: 'queue' }] as never);
  fake(SandboxesRepository).listOfWorkspace.mockResolvedValue([{ id: 'sb1' }] as never);
  fake(SecretsRepository).removeAll.mockResolvedValue(3);
  fake(VolumesRepository).list.mockResolvedValue([{ name: 'weights' }] as never);
  fake(NatsUsersService).revokeAllOf.mockResolvedValue(1);
  const registry = fake(RegistryImages);
  Object.defineProperty(registry, 'enabled', { value: true });
  registry.deleteRepositoriesUnder.mockResolvedValue(2);
  return {
    sut,
    tokens,
    deploymentRows,
    auth: fake(AuthService),
    deployments: fake(DeploymentsService),
    sandboxes: fake(SandboxesService),
    volumes: fake(VolumesService),
    registry,
  };
}

describe('WorkspaceDeletion.delete', () => {
  it("refuses the default workspace, the caller's own and one holding an operator token with a 409 each, deleting nothing", async () => {
    const { sut, tokens } = await deletion();
    tokens.findWorkspace.mockResolvedValueOnce({ id: 'w0', name: 'default' } as Workspace);
    await expect(sut.delete(operator, 'w0')).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/BOOTSTRAP_ADMIN_TOKEN/),
    });
    await expect(sut.delete({ ...operator, workspaceId: 'w1' }, 'w1')).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/calling token's own/),
    });
    tokens.activeOperatorTokens.mockResolvedValueOnce([{ id: 'op1', name: 'ci' }] as never);
    await expect(sut.delete(operator, 'w1')).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/ci \(op1\): revoke them first/),
    });
    await expect(sut.delete(operator, 'nope')).rejects.toMatchObject({ status: 404, message: 'workspace nope not found' });
    expect(tokens.markWorkspaceDeleted).not.toHaveBeenCalled();
    expect(tokens.revokeAllOf).not.toHaveBeenCalled();
  });

  it('answers 404 to the second of two concurrent deletes, which purges nothing', async () => {
    const { sut, tokens, deployments } = await deletion();
    tokens.markWorkspaceDeleted.mockResolvedValue(false);
    await expect(sut.delete(operator, 'w1')).rejects.toMatchObject({ status: 404 });
    expect(tokens.revokeAllOf).not.toHaveBeenCalled();
    expect(deployments.setState).not.toHaveBeenCalled();
  });

  it('marks it deleted under a claim, takes each thing it holds as its operator, and records it purged', async () => {
    const { sut, tokens, auth, deployments, sandboxes, volumes, registry } = await deletion();
    const answer = await sut.delete(operator, 'w1');
    expect(answer).toEqual({
      id: 'w1',
      name: 'team',
      revokedTokens: 2,
      revokedNatsUsers: 1,
      deletedDeployments: 2,
      terminatedSandboxes: 1,
      destroyedSecrets: 3,
      deletedVolumes: 1,
      deletedImages: 2,
      problems: [],
    });
    expect(tokens.markWorkspaceDeleted).toHaveBeenCalledWith('w1', 'tok-op', PURGE_CLAIM_MS);
    expect(auth.forget.mock.calls).toEqual([['t1'], ['t2']]);
    const acting = { workspaceId: 'w1', workspaceName: 'team', tokenId: 'tok-op', role: 'operator' };
    expect(deployments.setState.mock.calls).toEqual([
      [acting, 'app', 'delete'],
      [acting, 'queue', 'delete'],
    ]);
    expect(sandboxes.terminate).toHaveBeenCalledWith(acting, 'sb1');
    expect(volumes.delete).toHaveBeenCalledWith('w1', 'weights');
    expect(registry.deleteRepositoriesUnder).toHaveBeenCalledWith('builds/w1/');
    expect(tokens.endWorkspacePurge).toHaveBeenCalledWith('w1', true, PURGE_RETRY_MS);
  });

  it('names a failed step in problems, runs the others, and leaves the purge to be resumed', async () => {
    const { sut, tokens, deployments, volumes } = await deletion();
    deployments.setState.mockImplementation(async (_p, name) => {
      if (name === 'app') throw new Error('NATS unreachable');
      return undefined as never;
    });
    const answer = await sut.delete(operator, 'w1');
    expect(answer).toMatchObject({ deletedDeployments: 1, deletedVolumes: 1, problems: ['deployment app: NATS unreachable'] });
    expect(volumes.delete).toHaveBeenCalled();
    expect(tokens.endWorkspacePurge).toHaveBeenCalledWith('w1', false, PURGE_RETRY_MS);
  });
});

describe('WorkspaceDeletion.resume', () => {
  it('does nothing when no deleted workspace waits for its purge', async () => {
    const { sut, tokens } = await deletion();
    tokens.claimUnpurgedWorkspace.mockResolvedValue(undefined);
    expect(await sut.resume()).toBeUndefined();
    expect(tokens.claimUnpurgedWorkspace).toHaveBeenCalledWith(PURGE_CLAIM_MS);
    expect(tokens.revokeAllOf).not.toHaveBeenCalled();
    expect(tokens.endWorkspacePurge).not.toHaveBeenCalled();
  });

  it('purges the claimed workspace under the token that deleted it, taking only what is left', async () => {
    const { sut, tokens, deploymentRows, deployments, sandboxes } = await deletion();
    tokens.claimUnpurgedWorkspace.mockResolvedValue({ ...team, deletedBy: 'tok-op' });
    // The gateway that deleted it died after the tokens and the first deployment went.
    tokens.revokeAllOf.mockResolvedValue([]);
    deploymentRows.listWithCounts.mockResolvedValue([{ name: 'queue' }] as never);
    const answer = await sut.resume();
    expect(answer).toMatchObject({ id: 'w1', revokedTokens: 0, deletedDeployments: 1, problems: [] });
    expect(deployments.setState).toHaveBeenCalledWith(expect.objectContaining({ workspaceId: 'w1', tokenId: 'tok-op' }), 'queue', 'delete');
    expect(sandboxes.terminate).toHaveBeenCalledTimes(1);
    expect(tokens.endWorkspacePurge).toHaveBeenCalledWith('w1', true, PURGE_RETRY_MS);
  });
});
