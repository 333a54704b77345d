import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TERN_CONFIG } from '#tern/config';
import { ContainersRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { MachineAuthService } from '../machine-registration/machine-auth.service.js';
import { RegistryTokens } from './registry-tokens.service.js';

const HOST = 'registry.tern:5000';
const SERVICE = 'tern-registry';

function keyFile(): string {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const file = join(mkdtempSync(join(tmpdir(), 'registry-tokens-')), 'key.pem');
  writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  return file;
}
const KEY_FILE = keyFile();

async function registryTokens(token = true) {
  const registry = {
    host: HOST,
    ...(token
      ? { token: { keyFile: KEY_FILE, service: SERVICE, issuer: 'tern-gateway', ttlSeconds: 300, builderPools: ['builders'] } }
      : {}),
  };
  const { sut, fake } = await newTestService(RegistryTokens, [[TERN_CONFIG, { registry }]]);
  return { sut, machineAuth: fake(MachineAuthService), containers: fake(ContainersRepository) };
}

const asApiToken = (principal: Principal) => ({ kind: 'api-token', principal }) as never;
const asMachine = (pool: string) => ({ kind: 'machine-token', machine: { id: 'm1', pool } }) as never;
const basic = (password: string) => `Basic ${Buffer.from(`tern:${password}`).toString('base64')}`;
/** The access a signed token grants (its claims, which the registry checks). */
const access = (token: string) => (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { access: unknown[] }).access;

describe('RegistryTokens.issue (who may pull and push what)', () => {
  it("gives a workspace token its own builds and Tern's base images, and nothing of another workspace's", async () => {
    const { sut, machineAuth } = await registryTokens();
    machineAuth.identify.mockResolvedValue(asApiToken({ workspaceId: 'w1', workspaceName: 'team', tokenId: 't1', role: 'admin' }));
    const answer = await sut.issue(basic('tern_secret'), SERVICE, [
      'repository:builds/w1/app:pull,push',
      'repository:builds/w2/app:pull,push',
      'repository:builds/w10/app:pull',
      'repository:tern/base:pull,push',
      'repository:mirror/ghcr.io/acme/app:pull',
      'registry:catalog:*',
    ]);
    expect(machineAuth.identify).toHaveBeenCalledWith('Bearer tern_secret');
    expect(access(answer.token)).toEqual([
      { type: 'repository', name: 'builds/w1/app', actions: ['pull', 'push'] },
      { type: 'repository', name: 'tern/base', actions: ['pull'] },
    ]);
    expect(answer.access_token).toBe(answer.token);
  });

  it('gives an operator token every repository and the catalog', async () => {
    const { sut, machineAuth } = await registryTokens();
    machineAuth.identify.mockResolvedValue(asApiToken({ workspaceId: 'w0', workspaceName: 'default', tokenId: 'op', role: 'operator' }));
    const answer = await sut.issue(basic('x'), SERVICE, ['repository:builds/w2/app:pull,push', 'registry:catalog:*']);
    expect(access(answer.token)).toEqual([
      { type: 'repository', name: 'builds/w2/app', actions: ['pull', 'push'] },
      { type: 'registry', name: 'catalog', actions: ['*'] },
    ]);
  });

  it('lets a machine pull only the images of containers placed on it, and push nothing', async () => {
    const { sut, machineAuth, containers } = await registryTokens();
    machineAuth.identify.mockResolvedValue(asMachine('gpu'));
    containers.imageRepositoryPlacedOn.mockImplementation(async (_m, repository) => repository === `${HOST}/builds/w1/app`);
    const answer = await sut.issue(basic('machine-secret'), SERVICE, [
      'repository:builds/w1/app:pull,push',
      'repository:builds/w2/app:pull',
    ]);
    expect(access(answer.token)).toEqual([{ type: 'repository', name: 'builds/w1/app', actions: ['pull'] }]);
    expect(containers.imageRepositoryPlacedOn).toHaveBeenCalledWith('m1', `${HOST}/builds/w2/app`);
  });

  it('lets a machine of a builder pool pull anything and push under builds/ only', async () => {
    const { sut, machineAuth } = await registryTokens();
    machineAuth.identify.mockResolvedValue(asMachine('builders'));
    const answer = await sut.issue(basic('s'), SERVICE, ['repository:builds/w2/app:pull,push', 'repository:tern/base:pull,push']);
    expect(access(answer.token)).toEqual([
      { type: 'repository', name: 'builds/w2/app', actions: ['pull', 'push'] },
      { type: 'repository', name: 'tern/base', actions: ['pull'] },
    ]);
  });

  it('refuses a join token and a missing or malformed Authorization with a 401 saying how to log in', async () => {
    const { sut, machineAuth } = await registryTokens();
    machineAuth.identify.mockResolvedValue({ kind: 'join-token', machine: { id: 'm1' } } as never);
    await expect(sut.issue(basic('join'), SERVICE, [])).rejects.toMatchObject({
      status: 401,
      message: expect.stringMatching(/^a join token is good for registering only; log in with a machine token/),
    });
    await expect(sut.issue(undefined, SERVICE, [])).rejects.toMatchObject({
      status: 401,
      message: expect.stringMatching(/need credentials/),
    });
    await expect(sut.issue(basic(''), SERVICE, [])).rejects.toMatchObject({
      status: 401,
      message: expect.stringMatching(/^malformed Authorization/),
    });
  });

  it("refuses another registry's service and a malformed scope with a 400, and answers 404 without token auth", async () => {
    const { sut } = await registryTokens();
    await expect(sut.issue(basic('s'), 'other', [])).rejects.toMatchObject({
      status: 400,
      message: `service "other" is not this registry's ("${SERVICE}")`,
    });
    await expect(sut.issue(basic('s'), SERVICE, ['builds/w1/app'])).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/is not <type>:<name>:<actions>/),
    });
    const none = await registryTokens(false);
    expect(none.sut.enabled).toBe(false);
    expect(none.sut.controlPlaneToken([{ repository: 'x', actions: ['pull'] }])).toBeUndefined();
    await expect(none.sut.issue(basic('s'), SERVICE, [])).rejects.toMatchObject({
      status: 404,
      message: expect.stringMatching(/REGISTRY_TOKEN_KEY_FILE is not set/),
    });
  });
});
