import { randomBytes } from 'node:crypto';
import { TERN_CONFIG } from '#tern/config';
import { SecretsRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { SecretsService } from './secrets.service.js';

const at = new Date('2026-01-01T00:00:00Z');

/** The service with a real sealing key: what the repository is given to store is what it is asked to open. */
async function secrets(secretsKey: string | undefined = randomBytes(32).toString('base64')) {
  const { sut, fake } = await newTestService(SecretsService, [[TERN_CONFIG, { secretsKey }]]);
  const repo = fake(SecretsRepository);
  const stored = new Map<string, string>();
  repo.put.mockImplementation(async (workspaceId, name, sealed, bytes) => {
    stored.set(`${workspaceId}/${name}`, sealed);
    return { summary: { name, bytes, createdAt: at, updatedAt: at }, replaced: false };
  });
  repo.sealedValue.mockImplementation(async (workspaceId, name) => stored.get(`${workspaceId}/${name}`));
  return { sut, repo, stored };
}

describe('SecretsService', () => {
  it('stores a value sealed, never in clear, and reveals it to the control plane of its workspace', async () => {
    const { sut, repo, stored } = await secrets();
    expect(await sut.put('w1', 'hf_token', 'hf_secret')).toEqual({
      name: 'hf_token',
      bytes: 9,
      createdAt: at.toISOString(),
      updatedAt: at.toISOString(),
      replaced: false,
    });
    expect(stored.get('w1/hf_token')).not.toContain('hf_secret');
    expect(repo.put).toHaveBeenCalledWith('w1', 'hf_token', expect.stringMatching(/^v1\./), 9);
    expect(await sut.reveal('w1', 'hf_token')).toBe('hf_secret');
  });

  it("cannot open a sealed value under another workspace's or another secret's name", async () => {
    const { sut, stored } = await secrets();
    await sut.put('w1', 'hf_token', 'hf_secret');
    stored.set('w2/hf_token', stored.get('w1/hf_token')!);
    stored.set('w1/other', stored.get('w1/hf_token')!);
    await expect(sut.reveal('w2', 'hf_token')).rejects.toThrow();
    await expect(sut.reveal('w1', 'other')).rejects.toThrow();
  });

  it('answers 404 naming the command for a secret the workspace lacks', async () => {
    const { sut, repo } = await secrets();
    await expect(sut.reveal('w1', 'nope')).rejects.toMatchObject({
      status: 404,
      message: 'no secret "nope" in this workspace (tern secret set nope)',
    });
    repo.remove.mockResolvedValue(false);
    await expect(sut.remove('w1', 'nope')).rejects.toMatchObject({ status: 404 });
  });

  it('answers 503 saying how to make a key when the gateway has no SECRETS_KEY, storing nothing', async () => {
    const { sut, repo } = await newTestService(SecretsService, [[TERN_CONFIG, {}]]).then(({ sut, fake }) => ({
      sut,
      repo: fake(SecretsRepository),
    }));
    await expect(sut.put('w1', 'hf_token', 'v')).rejects.toMatchObject({ status: 503, message: expect.stringMatching(/no SECRETS_KEY/) });
    expect(repo.put).not.toHaveBeenCalled();
  });

  it("gives a starting container's agent its secrets in clear, and a 404 naming one deleted meanwhile", async () => {
    const { sut, repo, stored } = await secrets();
    await sut.put('w1', 'hf_token', 'hf_secret');
    repo.ofStartingContainer.mockResolvedValue({ workspaceId: 'w1', secrets: [{ name: 'hf_token', sealed: stored.get('w1/hf_token')! }] });
    expect(await sut.envOfStartingContainer('m1', 'c1')).toEqual({ env: { hf_token: 'hf_secret' } });
    expect(repo.ofStartingContainer).toHaveBeenCalledWith('m1', 'c1');
    repo.ofStartingContainer.mockResolvedValue({ workspaceId: 'w1', secrets: [{ name: 'gone', sealed: null }] });
    await expect(sut.envOfStartingContainer('m1', 'c1')).rejects.toMatchObject({
      status: 404,
      message: `secret "gone" named by the deployment's secrets is no longer in the workspace (tern secret set gone)`,
    });
    repo.ofStartingContainer.mockResolvedValue(undefined);
    await expect(sut.envOfStartingContainer('m2', 'c1')).rejects.toMatchObject({
      status: 404,
      message: 'no container c1 is starting on this machine',
    });
  });
});
