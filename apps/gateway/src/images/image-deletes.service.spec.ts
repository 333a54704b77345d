import { DeploymentsRepository, SandboxesRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { ImageDeletes } from './image-deletes.service.js';
import { RegistryImages } from './registry-images.js';

const HOST = 'registry.tern:5000';
const DIGEST = `sha256:${'d'.repeat(64)}`;
const admin: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 'tok1', role: 'admin' };
const operator: Principal = { workspaceId: 'w-ops', workspaceName: 'ops', tokenId: 'tok-op', role: 'operator' };
const mine = `${HOST}/builds/w1/app:abc`;
const theirs = `${HOST}/builds/w2/app:abc`;

async function deletes(registry: { enabled: boolean; host?: string } = { enabled: true, host: HOST }) {
  const { sut, fake } = await newTestService(ImageDeletes);
  const images = fake(RegistryImages);
  Object.defineProperties(images, { enabled: { value: registry.enabled }, host: { value: registry.host } });
  images.digestOf.mockResolvedValue(DIGEST);
  images.deleteManifest.mockResolvedValue(true);
  const deployments = fake(DeploymentsRepository);
  deployments.usingImage.mockResolvedValue([]);
  const sandboxes = fake(SandboxesRepository);
  sandboxes.liveUsingImage.mockResolvedValue([]);
  return { sut, images, deployments, sandboxes };
}

describe('ImageDeletes.delete', () => {
  it("deletes the admin's own build by the digest its tag names", async () => {
    const { sut, images } = await deletes();
    expect(await sut.delete(admin, mine)).toEqual({ image: mine, digest: DIGEST });
    expect(images.digestOf).toHaveBeenCalledWith('builds/w1/app', 'abc');
    expect(images.deleteManifest).toHaveBeenCalledWith('builds/w1/app', DIGEST);
  });

  it("answers 404 to an admin naming another workspace's build or Tern's base, asking the registry nothing", async () => {
    const { sut, images } = await deletes();
    for (const image of [theirs, `${HOST}/builds/w10/app:abc`, `${HOST}/tern/base:bookworm`])
      await expect(sut.delete(admin, image)).rejects.toMatchObject({
        status: 404,
        message: `image ${image} not found in workspace "team"`,
      });
    expect(images.digestOf).not.toHaveBeenCalled();
    expect(images.deleteManifest).not.toHaveBeenCalled();
  });

  it('lets the operator delete any image of the registry', async () => {
    const { sut, images } = await deletes();
    await sut.delete(operator, theirs);
    expect(images.deleteManifest).toHaveBeenCalledWith('builds/w2/app', DIGEST);
  });

  it("refuses with a 400 an image outside Tern's registry, or any when the installation has none", async () => {
    const { sut } = await deletes();
    await expect(sut.delete(operator, 'ghcr.io/acme/app:1')).rejects.toMatchObject({
      status: 400,
      message: `ref: ghcr.io/acme/app:1 is not in Tern's registry (${HOST}); only its images are deleted here`,
    });
    const none = await deletes({ enabled: false });
    await expect(none.sut.delete(operator, mine)).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/has none: REGISTRY_URL/),
    });
    await expect(none.sut.delete(operator, 'Not A Ref')).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/^ref: /) });
  });

  it('answers 404 when the registry holds no such tag, or the manifest went meanwhile', async () => {
    const { sut, images } = await deletes();
    images.digestOf.mockResolvedValueOnce(undefined);
    await expect(sut.delete(admin, mine)).rejects.toMatchObject({ status: 404 });
    expect(images.deleteManifest).not.toHaveBeenCalled();
    images.deleteManifest.mockResolvedValueOnce(false);
    await expect(sut.delete(admin, mine)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses with a 409 an image a deployment or a live sandbox runs, naming only the callers own users to an admin', async () => {
    const { sut, images, deployments, sandboxes } = await deletes();
    deployments.usingImage.mockResolvedValue([
      { name: 'api', workspaceId: 'w1', workspaceName: 'team' },
      { name: 'copycat', workspaceId: 'w2', workspaceName: 'rival' },
    ]);
    sandboxes.liveUsingImage.mockResolvedValue([{ id: 'sb1', workspaceId: 'w1' }] as never);
    await expect(sut.delete(admin, mine)).rejects.toMatchObject({
      status: 409,
      message: `image ${mine} is in use by deployment api, sandbox sb1: deploy another image or delete the deployment, terminate the sandbox, then delete it`,
    });
    expect(deployments.usingImage).toHaveBeenCalledWith(`${HOST}/builds/w1/app@${DIGEST}`);
    await expect(sut.delete(operator, mine)).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/in use by deployment team\/api, deployment rival\/copycat, sandbox sb1/),
    });
    expect(images.deleteManifest).not.toHaveBeenCalled();
  });
});
