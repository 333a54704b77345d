import { TERN_CONFIG } from '#tern/config';
import { ImageError } from '#tern/runtime';
import { newTestService } from '../../../../test/support/test-service.js';
import { SecretsService } from '../secrets/secrets.service.js';
import { ImagePins } from './image-pins.service.js';

// No registry listens on port 1: a reference that passes the ownership rule fails reaching it.
const REGISTRY = '127.0.0.1:1';

async function pins() {
  const { sut, fake } = await newTestService(ImagePins, [[TERN_CONFIG, { registry: { host: REGISTRY, insecure: true } }]]);
  return { sut, secrets: fake(SecretsService) };
}

describe('ImagePins.resolve (the ownership rule of every request that names an image)', () => {
  it("refuses another workspace's build, naming where the caller's own builds are", async () => {
    const { sut } = await pins();
    const theirs = `${REGISTRY}/builds/w2/app:abc`;
    await expect(sut.resolve(theirs, 'w1')).rejects.toThrow(
      new ImageError(theirs, "builds/ holds each workspace's own builds under builds/w1/: name one of yours"),
    );
  });

  it('refuses the build of a workspace whose id merely starts with the caller id', async () => {
    const { sut } = await pins();
    await expect(sut.resolve(`${REGISTRY}/builds/w10/app:abc`, 'w1')).rejects.toThrow(/each workspace's own builds under builds\/w1\//);
  });

  it("refuses Tern's mirror copies, sending the caller to the original image", async () => {
    const { sut } = await pins();
    await expect(sut.resolve(`${REGISTRY}/mirror/ghcr.io/acme/app@sha256:${'c'.repeat(64)}`, 'w1')).rejects.toThrow(
      /name the original image \(with registry_secret\)/,
    );
  });

  it('lets its own build through to the registry (which fails here, not the ownership rule)', async () => {
    const { sut } = await pins();
    const error = await sut.resolve(`${REGISTRY}/builds/w1/app:abc`, 'w1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImageError);
    expect((error as Error).message).not.toMatch(/each workspace's own builds|mirror/);
  });
});

describe('ImagePins.pin', () => {
  it('keeps `host`, and refuses registry credentials for it with a 400', async () => {
    const { sut } = await pins();
    expect(await sut.pin('host', 'w1')).toBe('host');
    await expect(sut.pin('host', 'w1', { workspaceId: 'w1', secret: 'hub' })).rejects.toMatchObject({
      status: 400,
      response: { message: ['registry_secret: only an image in a registry takes registry credentials'] },
    });
  });

  it("answers another workspace's build with a 400 under `image:`", async () => {
    const { sut } = await pins();
    await expect(sut.pin(`${REGISTRY}/builds/w2/app:abc`, 'w1')).rejects.toMatchObject({
      status: 400,
      response: { message: [expect.stringMatching(/^image: image .*builds\/w2\/app:abc: builds\/ holds each workspace's own builds/)] },
    });
  });

  it("refuses credentials for Tern's own registry, and a secret not of the form <username>:<password>, before any copy", async () => {
    const { sut, secrets } = await pins();
    await expect(sut.pin(`${REGISTRY}/builds/w1/app:abc`, 'w1', { workspaceId: 'w1', secret: 'hub' })).rejects.toMatchObject({
      status: 400,
      response: { message: [`registry_secret: ${REGISTRY} is Tern's own registry, which needs no secret`] },
    });
    secrets.reveal.mockResolvedValue('no-colon');
    await expect(sut.pin('ghcr.io/acme/app:1', 'w1', { workspaceId: 'w1', secret: 'hub' })).rejects.toMatchObject({
      status: 400,
      response: { message: ['registry_secret: secret "hub" must hold <username>:<password>'] },
    });
    expect(secrets.reveal).toHaveBeenCalledWith('w1', 'hub');
  });
});

describe('ImagePins.isPrivate', () => {
  it("is true for a workspace's builds and mirror copies in Tern's registry only", async () => {
    const { sut } = await pins();
    expect(sut.isPrivate(`${REGISTRY}/builds/w1/app@sha256:${'a'.repeat(64)}`)).toBe(true);
    expect(sut.isPrivate(`${REGISTRY}/mirror/ghcr.io/acme/app@sha256:${'a'.repeat(64)}`)).toBe(true);
    expect(sut.isPrivate(`${REGISTRY}/tern/base@sha256:${'a'.repeat(64)}`)).toBe(false);
    expect(sut.isPrivate(`ghcr.io/builds/w1/app@sha256:${'a'.repeat(64)}`)).toBe(false);
    expect(sut.isPrivate('host')).toBe(false);
  });
});
