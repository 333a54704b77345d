import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { ImageError } from '#tern/runtime';
import { newTestService } from '../../../../test/support/test-service.js';
import { ImagePins } from './image-pins.service.js';

/** Nothing listens on port 1: an image that gets past the ownership rule fails to resolve, at once. */
const REGISTRY = '127.0.0.1:1';
const config = { registry: { url: `http://${REGISTRY}`, host: REGISTRY, insecure: true } } as unknown as TernConfig;

async function pins() {
  return (await newTestService(ImagePins, [[TERN_CONFIG, config]])).sut;
}

describe('ImagePins: the one rule for what a workspace may name', () => {
  it("refuses another workspace's build or snapshot, before asking the registry", async () => {
    const p = await pins();
    for (const image of [`${REGISTRY}/builds/w-other/app:1`, `${REGISTRY}/builds/w-other/snapshots/secret:1`]) {
      await expect(p.resolve(image, 'w-mine')).rejects.toThrow(/builds\/ holds each workspace's own builds under builds\/w-mine\//);
      await expect(p.pin(image, 'w-mine')).rejects.toMatchObject({ status: 400 });
    }
  });

  it("refuses Tern's mirror of other registries", async () => {
    const p = await pins();
    await expect(p.resolve(`${REGISTRY}/mirror/ghcr.io/team/model:1`, 'w-mine')).rejects.toThrow(/mirror\/ holds Tern's copies/);
  });

  it("lets the workspace's own builds, Tern's base and other registries through to the registry", async () => {
    const p = await pins();
    for (const image of [`${REGISTRY}/builds/w-mine/app:1`, `${REGISTRY}/tern/base:bookworm`, '127.0.0.1:2/team/model:1']) {
      const refusal = await p.resolve(image, 'w-mine').catch((e: unknown) => e);
      expect(refusal).toBeInstanceOf(ImageError);
      expect((refusal as Error).message).toMatch(/cannot resolve in its registry/);
    }
    expect(await p.pin('host', 'w-mine')).toBe('host');
  });
});
