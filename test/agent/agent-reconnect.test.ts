import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { MACHINE_BEAT, type MachineHeartbeat } from '#tern/contracts';
import { Namespace } from '#tern/messaging';
import { freePort, waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { asHarness, natsAuthDir } from '../support/nats-users.js';
import { AgentProcess, ControlPlane, removeStateDir } from './harness.js';

/**
 * A NATS server of the test's own (JetStream on disk), so the test can take it away and bring it
 * back: operator mode with the run's operator and accounts, so the machine user the gateway
 * issues works on it as on the shared one.
 */
class PrivateNats {
  private child?: ChildProcess;
  readonly store = mkdtempSync(join(tmpdir(), 'tern-nats-'));

  constructor(readonly port: number) {}

  get url() {
    return `nats://127.0.0.1:${this.port}`;
  }

  async start() {
    const args = ['scripts/nats-auth.mjs', 'init', this.store, '--host', '127.0.0.1', '--port', String(this.port)];
    execFileSync(process.execPath, [...args, '--operator', join(natsAuthDir(), 'operator')]);
    this.child = spawn('nats-server', ['-c', join(this.store, 'server.conf')], { stdio: 'ignore' });
    await waitFor('nats-server up', async () => {
      const nc = await connect({ servers: this.url, reconnect: false, authenticator: asHarness() }).catch(() => undefined);
      await nc?.close();
      return !!nc;
    });
  }

  async kill() {
    if (!this.child || this.child.exitCode !== null) return;
    this.child.kill('SIGKILL');
    await once(this.child, 'exit');
  }

  async remove() {
    await this.kill();
    rmSync(this.store, { recursive: true, force: true });
  }
}

/**
 * NATS going away under a running agent: heartbeats pause without the agent failing, resume
 * on the same sequence (the gap shows what was lost), and an outage longer than the heartbeat
 * TTL makes the agent register again. The agent is pointed at a NATS server of the test's own
 * through the gateway's NATS_PUBLIC_URL; the control plane stays on the shared one.
 */
(await describeNeeding(['nats-server']))('agent across a NATS outage', () => {
  let plane: ControlPlane;
  let nats: PrivateNats;
  let agent: AgentProcess;
  let nc: NatsConnection | undefined;
  const beats: MachineHeartbeat[] = [];

  const listen = async () => {
    nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 200, authenticator: asHarness() });
    nc.subscribe(new Namespace(plane.namespace).subject(MACHINE_BEAT.subject.replace('*', 'agent-nats')), {
      callback: (_e, m) => void beats.push(m.json<MachineHeartbeat>()),
    });
  };

  beforeAll(async () => {
    nats = new PrivateNats(await freePort());
    await nats.start();
    plane = await ControlPlane.start('agentnats', {
      NATS_PUBLIC_URL: nats.url,
      MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1',
      MACHINE_HEARTBEAT_TTL_SECONDS: '3',
    });
    await listen();
    agent = AgentProcess.forPlane(plane, { MACHINE_ID: 'agent-nats' });
    agent.start();
    await agent.joined();
  }, 120_000);

  afterAll(async () => {
    await nc?.close().catch(() => undefined);
    await agent?.stop();
    await plane?.stop();
    await nats?.remove();
    if (agent) removeStateDir(agent.stateDir);
  });

  it('boots NATS from the registration answer', async () => {
    expect(await agent.waitForLog(/^registered as agent-nats/)).toMatchObject({ nats: [nats.url] });
    await waitFor('first heartbeats', async () => beats.length >= 2);
  });

  it('keeps going through an outage: beats pause, resume on the same sequence, and it registers again', async () => {
    const before = beats.at(-1)!.sequence;
    await nats.kill();
    await new Promise((r) => setTimeout(r, 5000));
    expect(agent.running).toBe(true);
    await nats.start();

    await waitFor('heartbeats again', async () => beats.at(-1)!.sequence > before + 1, 30_000);
    const after = beats.filter((b) => b.sequence > before);
    // Beats due while NATS was gone were skipped, not queued: the first one back jumps ahead.
    expect(after[0].sequence).toBeGreaterThan(before + 2);
    await agent.waitForLog(/^registering again: NATS was unreachable for \d+ s \(heartbeat TTL 3 s\)/, 15_000);
    await agent.waitForLog((r) => String(r.msg).startsWith('registering with') && String(r.msg).includes('NATS was unreachable'));
    expect(agent.records().filter((r) => r.level === 60)).toEqual([]);
  });
});
