import type { MachineNetworkTested } from '#tern/contracts';
import { AGENT_CONTEXT } from './agent-context.js';
import { agentContext } from '../../../test/support/agent-context.js';
import { newTestService } from '../../../test/support/test-service.js';
import { ContainersService } from './containers/containers.service.js';
import { HeartbeatService } from './heartbeat/heartbeat.service.js';
import { JoinService } from './join.service.js';
import { NetworkProbe } from './network-test/network-probe.js';
import { RegistrationWatch } from './registration/registration-watch.js';

/** What the network test answers; the join does not read it. */
const tested = {} as MachineNetworkTested;

/** The join, with each step noting itself and the agent's phase when it ran. */
async function join() {
  const ctx = agentContext();
  const { sut, fake } = await newTestService(JoinService, [[AGENT_CONTEXT, ctx]]);
  const steps: string[] = [];
  const note = (step: string) => () => void steps.push(`${step} (${ctx.state.phase})`);
  fake(ContainersService).reconcile.mockImplementation(async () => note('reconcile')());
  fake(NetworkProbe).run.mockImplementation(async () => {
    note('network test')();
    return tested;
  });
  fake(HeartbeatService).start.mockImplementation(note('heartbeats'));
  fake(RegistrationWatch).start.mockImplementation(note('registration watch'));
  return { sut, ctx, steps, probe: fake(NetworkProbe), heartbeats: fake(HeartbeatService) };
}

describe('JoinService', () => {
  it('settles running containers, then tests the network, then heartbeats, and only then says running', async () => {
    const { sut, ctx, steps } = await join();
    await sut.onApplicationBootstrap();
    expect(steps).toEqual([
      'reconcile (testing-network)',
      'network test (testing-network)',
      'heartbeats (testing-network)',
      'registration watch (testing-network)',
    ]);
    expect(ctx.state.phase).toBe('running');
  });

  it('sends no heartbeat while the network test has not finished: the scheduler places nothing on an untested machine', async () => {
    const { sut, ctx, probe, heartbeats } = await join();
    let finishTest!: () => void;
    probe.run.mockReturnValue(new Promise((resolve) => (finishTest = () => resolve(tested))));
    const joined = sut.onApplicationBootstrap();
    await new Promise((r) => setImmediate(r));
    expect(heartbeats.start).not.toHaveBeenCalled();
    expect(ctx.state.phase).toBe('testing-network');
    finishTest();
    await joined;
    expect(heartbeats.start).toHaveBeenCalledTimes(1);
  });

  it('does not join when the network test fails: no heartbeats, never running', async () => {
    const { sut, ctx, probe, heartbeats } = await join();
    probe.run.mockRejectedValue(new Error('NATS round trip over 2 s'));
    await expect(sut.onApplicationBootstrap()).rejects.toThrow('NATS round trip over 2 s');
    expect(heartbeats.start).not.toHaveBeenCalled();
    expect(ctx.state.phase).toBe('testing-network');
  });
});
