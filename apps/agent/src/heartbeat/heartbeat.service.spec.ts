import { MACHINE_BEAT } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { agentContext } from '../../../../test/support/agent-context.js';
import { newTestService } from '../../../../test/support/test-service.js';
import { AGENT_CONTEXT } from '../agent-context.js';
import { ContainersService } from '../containers/containers.service.js';
import { h100 } from '../discovery/gpu/fixtures/inventory.js';
import { NatsLink } from '../nats-link.js';
import type { AgentSettings } from '../settings/agent-settings.js';
import { HeartbeatService } from './heartbeat.service.js';

async function heartbeats(settings: Partial<AgentSettings> = {}) {
  const ctx = agentContext({ gpus: [h100(0), h100(1)], settings });
  const { sut, fake } = await newTestService(HeartbeatService, [[AGENT_CONTEXT, ctx]]);
  const link = fake(NatsLink);
  link.connected = true;
  const containers = fake(ContainersService);
  containers.busyGpus.mockReturnValue(new Set(['nvidia:1']));
  containers.runningIds.mockReturnValue(['c-1']);
  return { sut, ctx, link, containers, messaging: fake(Messaging) };
}

describe('HeartbeatService.beat', () => {
  it("publishes the machine's load, which GPUs are busy and its containers on core NATS, under its own machine's subject", async () => {
    const { sut, ctx, messaging } = await heartbeats();
    expect(await sut.beat()).toBe(true);
    expect(messaging.emit).toHaveBeenCalledTimes(1);
    const [contract, beat, tokens] = messaging.emit.mock.calls[0];
    expect(contract).toBe(MACHINE_BEAT);
    expect(beat).toMatchObject({
      machineId: 'm-1',
      pool: 'default',
      sequence: 0,
      gpus: [
        { index: 0, state: 'free' },
        { index: 1, state: 'busy' },
      ],
      runningContainers: ['c-1'],
      cpuPercent: expect.any(Number),
      memoryPercent: expect.any(Number),
    });
    expect(beat).not.toHaveProperty('isolation');
    expect(beat).not.toHaveProperty('builder');
    expect(tokens).toEqual(['m-1']);
    expect(ctx.state.busyGpus).toEqual(new Set(['nvidia:1']));
    expect(ctx.state.lastHeartbeatAt).toEqual(expect.any(Number));
  });

  it('says what the machine offers beyond containers: its isolation, building images, a site cache', async () => {
    const { sut, containers, messaging } = await heartbeats({ builder: true, siteCache: 'http://cache.site:8080' });
    containers.isolation.mockReturnValue({ runtime: 'runc', network: 'private', userNamespaces: true });
    await sut.beat();
    expect(messaging.emit.mock.calls[0][1]).toMatchObject({
      isolation: { runtime: 'runc', network: 'private', userNamespaces: true },
      builder: true,
      siteCache: 'http://cache.site:8080',
    });
  });

  it('skips a beat while NATS is down but uses up its sequence number, so the scheduler sees the gap', async () => {
    const { sut, link, messaging } = await heartbeats();
    link.connected = false;
    expect(await sut.beat()).toBe(false);
    expect(messaging.emit).not.toHaveBeenCalled();
    link.connected = true;
    expect(await sut.beat()).toBe(true);
    expect(messaging.emit.mock.calls[0][1]).toMatchObject({ sequence: 1 });
    expect(sut.lastSequence).toBe(1);
  });

  it('survives a publish that fails: the beat reports false, the next one goes out with the next number', async () => {
    const { sut, ctx, messaging } = await heartbeats();
    messaging.emit.mockImplementationOnce(() => {
      throw new Error('connection closed');
    });
    expect(await sut.beat()).toBe(false);
    expect(ctx.state.lastHeartbeatAt).toBeUndefined();
    expect(await sut.beat()).toBe(true);
    expect(messaging.emit.mock.calls[1][1]).toMatchObject({ sequence: 1 });
  });
});
