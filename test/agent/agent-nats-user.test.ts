import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { MACHINE_BEAT, type MachineHeartbeat } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { jwtExpiresAt } from '#tern/nats-auth';
import { TEST_NATS } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';
import { AgentProcess, ControlPlane, removeStateDir } from './harness.js';

const TTL_S = 12;

/** The JWT in the agent's nats.creds. */
function credsJwt(stateDir: string): string {
  return /-----BEGIN NATS USER JWT-----\n(.+)\n/.exec(readFileSync(join(stateDir, 'nats.creds'), 'utf8'))![1];
}

/**
 * The agent's own NATS user: its key pair stays in its state dir (mode 600), the gateway's JWT
 * lives MACHINE_NATS_JWT_TTL_SECONDS, and the agent renews it over HTTPS before it expires, so
 * it keeps heartbeating across expiries (the server drops the expired connection; the
 * reconnection reads the renewed nats.creds).
 */
describe('agent NATS user', () => {
  let plane: ControlPlane;
  let agent: AgentProcess;
  let nc: NatsConnection;
  const beats: { at: number; beat: MachineHeartbeat }[] = [];

  beforeAll(async () => {
    plane = await ControlPlane.start('agentnatsuser', {
      MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1',
      MACHINE_NATS_JWT_TTL_SECONDS: String(TTL_S),
    });
    nc = await connectNats({ ...TEST_NATS, name: 'agent-nats-user-test' });
    const messaging = new Messaging(nc, new Namespace(plane.namespace));
    nc.subscribe(messaging.subject(MACHINE_BEAT, ['agent-renew']), {
      callback: (_e, m) => void beats.push({ at: Date.now(), beat: m.json<MachineHeartbeat>() }),
    });
    agent = AgentProcess.forPlane(plane, { MACHINE_ID: 'agent-renew' });
    agent.start();
    await agent.joined();
  }, 120_000);

  afterAll(async () => {
    await nc?.close();
    await agent?.stop();
    await plane?.stop();
    if (agent) removeStateDir(agent.stateDir);
  });

  it('keeps its seed to itself: nats.nk and nats.creds are readable by their owner only', () => {
    for (const f of ['nats.nk', 'nats.creds']) expect([f, statSync(join(agent.stateDir, f)).mode & 0o777]).toEqual([f, 0o600]);
  });

  it("hears the scheduler's verdict on its own machine, on the only state-change subject its user may subscribe", async () => {
    const heard = await agent.waitForLog(/^the scheduler moved this machine .* → (ready|unschedulable)/, 60_000);
    expect(String(heard.msg)).toMatch(/→ (ready|unschedulable)/);
  });

  it('renews its JWT before it expires and keeps heartbeating past the first one', async () => {
    const first = credsJwt(agent.stateDir);
    const firstExpiry = jwtExpiresAt(first)!;
    await agent.waitForLog(
      (r) => String(r.msg).startsWith('registering with') && String(r.msg).includes('renewing its NATS user'),
      TTL_S * 1000,
    );
    await waitFor('a renewed nats.creds', async () => credsJwt(agent.stateDir) !== first, 5000);
    expect(jwtExpiresAt(credsJwt(agent.stateDir))!).toBeGreaterThan(firstExpiry);
    await waitFor('heartbeats after the first JWT expired', async () => beats.some((b) => b.at > firstExpiry + 2000), (TTL_S + 10) * 1000);
    expect(agent.running).toBe(true);
  });
});
