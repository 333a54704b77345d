import { TERN_CONFIG } from '#tern/config';
import { type ImageBuild } from '#tern/contracts';
import { MachinesRepository } from '#tern/persistence';
import { fakeOf, newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { CodeStore } from '../code/code-store.js';
import { CodeService } from '../code/code.service.js';
import { HeartbeatSnapshotReader } from '../machines/heartbeat-snapshot-reader.js';
import { RegistryTokens } from '../registry-tokens/registry-tokens.service.js';
import { SecretsService } from '../secrets/secrets.service.js';
import type { ImageBuildRequest } from './dto/image-build.request.js';
import { ImageBuildsService } from './image-builds.service.js';
import { ImagePins } from './image-pins.service.js';

// No registry listens on port 1: nothing is found built already, and nothing is pulled.
const REGISTRY = { host: '127.0.0.1:1', insecure: true, push: { username: 'builder', password: 'pw' } };
const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 'tok1', role: 'admin' };
const CODE = `sha256:${'a'.repeat(64)}`;
const request = (image: Partial<ImageBuild>, over: Partial<ImageBuildRequest> = {}) =>
  ({ name: 'app', image: { pip: ['numpy'], ...image }, ...over }) as ImageBuildRequest;

/** The service with the real ownership rule of ImagePins in front of a base, or a fake that pins anything. */
async function builds(options: { realPins?: boolean; registry?: object | undefined } = {}) {
  const config = { registry: 'registry' in options ? options.registry : REGISTRY };
  const realPins = new ImagePins(config as never, fakeOf(RegistryTokens), fakeOf(SecretsService));
  const { sut, fake } = await newTestService(ImageBuildsService, [
    [TERN_CONFIG, config],
    ...(options.realPins ? [[ImagePins, realPins] as [typeof ImagePins, ImagePins]] : []),
  ]);
  if (!options.realPins) fake(ImagePins).resolve.mockImplementation(async (ref) => `${ref}@sha256:${'b'.repeat(64)}`);
  const machines = fake(MachinesRepository);
  machines.list.mockResolvedValue([]);
  fake(HeartbeatSnapshotReader).getMany.mockResolvedValue(new Map());
  return { sut, machines, snapshots: fake(HeartbeatSnapshotReader), code: fake(CodeService), store: fake(CodeStore) };
}

describe('ImageBuildsService.start', () => {
  it('answers 503 saying what to set when the installation has no registry', async () => {
    const { sut, machines } = await builds({ registry: undefined });
    await expect(sut.start(principal, request({}))).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/set REGISTRY_URL/),
    });
    expect(machines.list).not.toHaveBeenCalled();
  });

  it("refuses a base that is another workspace's build with a 400 under image.base, before choosing a builder", async () => {
    const { sut, machines } = await builds({ realPins: true });
    await expect(sut.start(principal, request({ base: `${REGISTRY.host}/builds/w2/secret-sauce:abc` }))).rejects.toMatchObject({
      status: 400,
      response: {
        message: [
          expect.stringMatching(/^image\.base: .*builds\/ holds each workspace's own builds under builds\/w1\/: name one of yours/),
        ],
      },
    });
    await expect(sut.start(principal, request({ base: `${REGISTRY.host}/mirror/ghcr.io/acme/app:1` }))).rejects.toMatchObject({
      status: 400,
      response: { message: [expect.stringMatching(/^image\.base: .*name the original image/)] },
    });
    expect(machines.list).not.toHaveBeenCalled();
  });

  it("resolves the base in the caller's workspace, Tern's base by default, with a hint to push it when missing", async () => {
    const { sut } = await builds({ realPins: true });
    await expect(sut.start(principal, request({}))).rejects.toMatchObject({
      status: 400,
      response: {
        message: [
          expect.stringMatching(
            /^image\.base: image 127\.0\.0\.1:1\/tern\/base:bookworm: .*\(push Tern's base once with: sudo tern image base\)$/s,
          ),
        ],
      },
    });
  });

  it("refuses pip_wheels without the spec's folder (400) and with another workspace's upload (404, never read)", async () => {
    const { sut, code, store } = await builds();
    await expect(sut.start(principal, request({ pip_wheels: ['wheels/'] } as never))).rejects.toMatchObject({
      status: 400,
      response: { message: [expect.stringMatching(/^image\.pip_wheels reads the spec's folder/)] },
    });
    code.exists.mockImplementation(async (workspaceId) => workspaceId === 'w2');
    await expect(sut.start(principal, request({ pip_wheels: ['wheels/'] } as never, { code: CODE }))).rejects.toMatchObject({
      status: 404,
      message: `code ${CODE} not found: upload the spec's folder first`,
    });
    expect(code.exists).toHaveBeenCalledWith('w1', CODE);
    expect(store.get).not.toHaveBeenCalled();
  });

  it('answers 503 when no ready machine builds: a quarantined builder and one not building do not count', async () => {
    const { sut, machines, snapshots } = await builds();
    machines.list.mockResolvedValue([
      { id: 'm-quarantined', verification: 'quarantined' },
      { id: 'm-plain', verification: 'verified' },
    ] as never);
    snapshots.getMany.mockResolvedValue(
      new Map([
        ['m-quarantined', { builder: true }],
        ['m-plain', { builder: false }],
      ]) as never,
    );
    await expect(sut.start(principal, request({}))).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/^no machine offers building: start an agent with AGENT_BUILDER=true/),
    });
    expect(machines.list).toHaveBeenCalledWith({ state: 'ready' });
  });

  it('answers 503 when the registry takes no gateway tokens and has no push user for builders', async () => {
    const { sut, machines } = await builds({ registry: { host: REGISTRY.host, insecure: true } });
    await expect(sut.start(principal, request({}))).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/set REGISTRY_TOKEN_KEY_FILE, or REGISTRY_PUSH_USERNAME and REGISTRY_PUSH_PASSWORD/),
    });
    expect(machines.list).not.toHaveBeenCalled();
  });
});
