import { TERN_CONFIG } from '#tern/config';
import { NATS_CONNECTION } from '#tern/messaging';
import { SelfHealth } from '#tern/observability';
import { newTestService } from '../../../../test/support/test-service.js';
import { CONTROL_PLANE_ROLES, SystemHealthService } from './system-health.service.js';

type Answer = { name: string; id: string; version: string; metadata: Record<string, string> };

const answer = (role: string, metadata: Record<string, string> = {}): Answer => ({
  name: `tern-${role}`,
  id: `${role}-1`,
  version: '1.0.0',
  metadata: { namespace: 'tern', role, host: 'cp-1', startedAt: '2026-01-01T00:00:00Z', ...metadata },
});

/** A NATS connection on which the processes given answer the $SRV.PING. */
function natsWith(answers: Answer[], closed = false) {
  let deliver: (err: Error | null, msg: { json: () => Answer }) => void = () => undefined;
  return {
    isClosed: () => closed,
    subscribe: (_subject: string, opts: { callback: typeof deliver }) => {
      deliver = opts.callback;
      return { unsubscribe: () => undefined };
    },
    publish: (subject: string) => {
      if (subject === '$SRV.PING') for (const a of answers) deliver(null, { json: () => a });
    },
  };
}

async function systemHealth(answers: Answer[], closed = false) {
  const { sut, fake } = await newTestService(SystemHealthService, [
    [NATS_CONNECTION, natsWith(answers, closed)],
    [TERN_CONFIG, { nats: { namespace: 'tern' }, servicePingTimeoutMs: 5 }],
  ]);
  const self = fake(SelfHealth);
  self.check.mockResolvedValue({ status: 'ok', details: { nats: { status: 'up' } } } as never);
  return { sut, self };
}

describe('SystemHealthService.check', () => {
  it('is ok when every control-plane service answers, and lists the agents that did', async () => {
    const { sut } = await systemHealth([...CONTROL_PLANE_ROLES.map((r) => answer(r)), answer('agent', { machineId: 'm-1', pool: 'gpu' })]);
    const health = await sut.check();
    expect(health.status).toBe('ok');
    expect(health.services.scheduler).toEqual({
      status: 'up',
      instances: [{ id: 'scheduler-1', host: 'cp-1', version: '1.0.0', startedAt: '2026-01-01T00:00:00Z' }],
    });
    expect(health.agents).toEqual([{ id: 'agent-1', machineId: 'm-1', pool: 'gpu', host: 'cp-1', version: '1.0.0' }]);
  });

  it('is degraded while a control-plane service does not answer, naming it down', async () => {
    const { sut } = await systemHealth(CONTROL_PLANE_ROLES.filter((r) => r !== 'metering').map((r) => answer(r)));
    const health = await sut.check();
    expect(health.status).toBe('degraded');
    expect(health.services.metering).toEqual({ status: 'down', instances: [] });
  });

  it('counts this gateway down when its own NATS or Postgres check fails, even though it answered the ping', async () => {
    const { sut, self } = await systemHealth(CONTROL_PLANE_ROLES.map((r) => answer(r)));
    self.check.mockRejectedValue({ response: { details: { postgres: { status: 'down' } } } });
    const health = await sut.check();
    expect(health.status).toBe('degraded');
    expect(health.services.gateway).toMatchObject({ status: 'down', details: { postgres: { status: 'down' } } });
  });

  it('sends no ping on a closed connection and calls everything down', async () => {
    const { sut } = await systemHealth(
      CONTROL_PLANE_ROLES.map((r) => answer(r)),
      true,
    );
    const health = await sut.check();
    expect(health.status).toBe('degraded');
    expect(CONTROL_PLANE_ROLES.map((r) => health.services[r].status)).toEqual(CONTROL_PLANE_ROLES.map(() => 'down'));
  });
});
