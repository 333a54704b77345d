import { BadRequestException } from '@nestjs/common';
import { TERN_CONFIG } from '#tern/config';
import { AGENT_SANDBOX_SNAPSHOT } from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { ImagePins } from '../images/image-pins.service.js';
import { SandboxSnapshots } from './sandbox-snapshots.service.js';
import { SandboxesService } from './sandboxes.service.js';

const HOST = 'registry.tern:5000';
const DIGEST = `sha256:${'e'.repeat(64)}`;
const BASE = `${HOST}/tern/base:bookworm@sha256:${'b'.repeat(64)}`;
const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 't1', role: 'member' };
const PUSH = { host: HOST, insecure: false, push: { username: 'builder', password: 'pw' } };

async function snapshots(registry: object | null = PUSH, image = 'docker.io/library/python:3.12-slim') {
  const { sut, fake } = await newTestService(SandboxSnapshots, [[TERN_CONFIG, { registry: registry ?? undefined }]]);
  const sandboxes = fake(SandboxesService);
  sandboxes.running.mockResolvedValue({ id: 'sb1', machineId: 'm1', spec: { image } } as never);
  const messaging = fake(Messaging);
  messaging.request.mockResolvedValue({ digest: DIGEST } as never);
  const pins = fake(ImagePins);
  pins.pin.mockResolvedValue(BASE);
  return { sut, sandboxes, messaging, pins };
}

describe('SandboxSnapshots.snapshot', () => {
  it("has the sandbox's own machine push it under the workspace's builds, and answers it pinned", async () => {
    const { sut, messaging } = await snapshots();
    const answer = await sut.snapshot(principal, 'sb1', { name: 'dev', tag: 'v1' });
    const target = `${HOST}/builds/w1/snapshots/dev:v1`;
    expect(answer).toEqual({ image: `${HOST}/builds/w1/snapshots/dev@${DIGEST}`, digest: DIGEST, tag: 'dev:v1' });
    expect(messaging.request).toHaveBeenCalledWith(
      AGENT_SANDBOX_SNAPSHOT,
      {
        sandboxId: 'sb1',
        image: 'docker.io/library/python:3.12-slim',
        target,
        registry: { host: HOST, insecure: false, username: 'builder', password: 'pw' },
      },
      expect.objectContaining({ tokens: ['m1'] }),
    );
  });

  it("lays a host sandbox's snapshot on Tern's base, and answers 409 saying how to push it when missing", async () => {
    const { sut, messaging, pins } = await snapshots(PUSH, 'host');
    await sut.snapshot(principal, 'sb1', {});
    expect(pins.pin).toHaveBeenCalledWith(`${HOST}/tern/base:bookworm`, 'w1');
    expect(messaging.request).toHaveBeenCalledWith(AGENT_SANDBOX_SNAPSHOT, expect.objectContaining({ image: BASE }), expect.anything());
    pins.pin.mockRejectedValue(new BadRequestException(['image: not found']));
    await expect(sut.snapshot(principal, 'sb1', {})).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/push it once with sudo tern image base/),
    });
  });

  it('answers 409 when there is no registry, or nothing may push to it, asking no machine', async () => {
    const none = await snapshots(null);
    await expect(none.sut.snapshot(principal, 'sb1', {})).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/set REGISTRY_URL/),
    });
    const noPush = await snapshots({ host: HOST, insecure: false });
    await expect(noPush.sut.snapshot(principal, 'sb1', {})).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/nothing may push a snapshot/),
    });
    expect(none.messaging.request).not.toHaveBeenCalled();
    expect(noPush.messaging.request).not.toHaveBeenCalled();
  });

  it('answers 503 naming the machine when it does not answer or cannot snapshot', async () => {
    const { sut, messaging } = await snapshots();
    messaging.request.mockRejectedValueOnce(new RequestError(503, 'no responders', 'agent.snapshot'));
    await expect(sut.snapshot(principal, 'sb1', {})).rejects.toMatchObject({
      status: 503,
      message: 'machine m1 did not snapshot sandbox sb1: no responders',
    });
    messaging.request.mockResolvedValueOnce({ reason: 'disk full' } as never);
    await expect(sut.snapshot(principal, 'sb1', {})).rejects.toMatchObject({
      status: 503,
      message: 'machine m1 could not snapshot sandbox sb1: disk full',
    });
  });
});
