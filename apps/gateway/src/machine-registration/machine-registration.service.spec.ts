import { TERN_CONFIG } from '#tern/config';
import { MACHINE_DISCOVERED, MACHINE_REGISTERED, MACHINE_STATE_CHANGED } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { hashToken, type Machine, MachinesRepository, type Pool } from '#tern/persistence';
import { registration } from '../../../../test/machines/harness.js';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { PoolsService } from '../pools/pools.service.js';
import { MachineNatsUsers } from './machine-nats-users.js';
import { MachineRegistrationService } from './machine-registration.service.js';

const config = {
  nats: { namespace: 'tern', user: 'control-plane', pass: 'secret' },
  machines: { natsPublicUrls: ['nats://nats.example:4222'], heartbeatIntervalSeconds: 10, heartbeatTtlSeconds: 30 },
};
const registeredAt = new Date('2026-01-01T00:00:00Z');

const box = (over: Partial<Machine> = {}) =>
  ({ id: 'box-1', pool: 'gpu', joinTokenUsedAt: null, joinTokenExpiresAt: new Date(Date.now() + 3_600_000), ...over }) as Machine;

async function registrations(state: 'pending' | 'ready' | 'removed' = 'pending', operatorMode = false) {
  const { sut, fake } = await newTestService(MachineRegistrationService, [[TERN_CONFIG, config]]);
  const machines = fake(MachinesRepository);
  // One transaction: the fake is its own transactional repository.
  machines.transaction.mockImplementation((work) => work(machines));
  machines.redeemJoinToken.mockResolvedValue(true);
  machines.insertWithCredential.mockResolvedValue(true);
  machines.lockState.mockResolvedValue(state === 'removed' ? undefined : state);
  machines.storeInventory.mockResolvedValue({ pool: 'gpu', registeredAt });
  machines.markRegistered.mockResolvedValue(registeredAt);
  fake(PoolsService).require.mockImplementation(async (name) => ({ name, minNetworkMbps: null }) as Pool);
  const messaging = fake(Messaging);
  messaging.publish.mockResolvedValue({ seq: 1 } as never);
  const natsUsers = fake(MachineNatsUsers);
  Object.defineProperty(natsUsers, 'enabled', { value: operatorMode });
  natsUsers.issue.mockResolvedValue('machine.jwt');
  return { sut, machines, messaging, natsUsers };
}

const subjects = (messaging: Awaited<ReturnType<typeof registrations>>['messaging']) =>
  messaging.publish.mock.calls.map(([c]) => c.subject);

describe('MachineRegistrationService: a join token', () => {
  it('is redeemed once for a machine token, the machine moving pending → registered with its events', async () => {
    const { sut, machines, messaging } = await registrations('pending');
    const answer = await sut.register({ kind: 'join-token', machine: box() }, registration('gpu'));
    expect(answer).toMatchObject({ machineId: 'box-1', pool: 'gpu', machineToken: expect.stringMatching(/^tern_machine_/) });
    // Only the token's hash is stored.
    expect(machines.redeemJoinToken).toHaveBeenCalledWith('box-1', hashToken(answer.machineToken!));
    expect(subjects(messaging)).toEqual([MACHINE_REGISTERED.subject, MACHINE_DISCOVERED.subject, MACHINE_STATE_CHANGED.subject]);
    expect(messaging.publish).toHaveBeenCalledWith(
      MACHINE_STATE_CHANGED,
      expect.objectContaining({ machineId: 'box-1', from: 'pending', to: 'registered' }),
      expect.anything(),
    );
  });

  it('is refused with a 401 once used, or expired, saying what to do; nothing is stored', async () => {
    const { sut, machines } = await registrations();
    await expect(
      sut.register({ kind: 'join-token', machine: box({ joinTokenUsedAt: new Date() }) }, registration('gpu')),
    ).rejects.toMatchObject({
      status: 401,
      message: expect.stringMatching(/^join token already used/),
    });
    await expect(
      sut.register({ kind: 'join-token', machine: box({ joinTokenExpiresAt: new Date(Date.now() - 1000) }) }, registration('gpu')),
    ).rejects.toMatchObject({ status: 401, message: expect.stringMatching(/^join token expired at .*tern machine create$/) });
    expect(machines.transaction).not.toHaveBeenCalled();
  });

  it('loses a race to a concurrent redemption with a 401 that says why', async () => {
    const { sut, machines, messaging } = await registrations();
    machines.redeemJoinToken.mockResolvedValue(false);
    machines.joinTokenStatus.mockResolvedValue({ usedAt: new Date(), expiresAt: null, now: new Date() } as never);
    await expect(sut.register({ kind: 'join-token', machine: box() }, registration('gpu'))).rejects.toMatchObject({
      status: 401,
      message: expect.stringMatching(/^join token already used/),
    });
    expect(messaging.publish).not.toHaveBeenCalled();
  });

  it('is bound to its machine and pool: another in the body is a 409 naming both', async () => {
    const { sut } = await registrations();
    await expect(sut.register({ kind: 'join-token', machine: box() }, registration('cpu'))).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/is in pool "gpu" but the agent asked for "cpu"; run tern-agent init with --pool gpu$/),
    });
    await expect(sut.register({ kind: 'join-token', machine: box() }, registration('gpu', { machineId: 'box-2' }))).rejects.toMatchObject({
      status: 409,
      message: 'this join token belongs to machine "box-1", not "box-2"',
    });
  });

  it('fails the whole registration with a 503 when NATS does not take its events, so the agent may retry', async () => {
    const { sut, messaging } = await registrations();
    messaging.publish.mockRejectedValue(new Error('no JetStream'));
    const registering = sut.register({ kind: 'join-token', machine: box() }, registration('gpu'));
    await expect(registering).rejects.toMatchObject({ status: 503, message: expect.stringMatching(/no JetStream.*try again/) });
  });
});

describe('MachineRegistrationService: again, with the machine token', () => {
  it("stores the new inventory but leaves a heartbeating machine's state to its heartbeats, and issues no new token", async () => {
    const { sut, machines, messaging } = await registrations('ready');
    const answer = await sut.register({ kind: 'machine-token', machine: box() }, registration('gpu'));
    expect(answer.machineToken).toBeUndefined();
    expect(machines.storeInventory).toHaveBeenCalledWith('box-1', expect.objectContaining({ hostname: 'worker-1' }), '0.1.0');
    expect(machines.markRegistered).not.toHaveBeenCalled();
    expect(subjects(messaging)).not.toContain(MACHINE_STATE_CHANGED.subject);
  });

  it('answers 401 for a machine removed meanwhile', async () => {
    const { sut } = await registrations('removed');
    await expect(sut.register({ kind: 'machine-token', machine: box() }, registration('gpu'))).rejects.toMatchObject({
      status: 401,
      message: 'unknown token: its machine was removed',
    });
  });

  it("gives the machine its own NATS user in operator mode, never the control plane's credentials", async () => {
    const operator = await registrations('ready', true);
    const own = await operator.sut.register({ kind: 'machine-token', machine: box() }, registration('gpu', { natsPublicKey: 'UKEY' }));
    expect(operator.natsUsers.issue).toHaveBeenCalledWith('box-1', 'UKEY');
    expect(own.nats).toEqual({ servers: ['nats://nats.example:4222'], namespace: 'tern', jwt: 'machine.jwt' });

    const shared = await registrations('ready', false);
    const plain = await shared.sut.register({ kind: 'machine-token', machine: box() }, registration('gpu', { natsPublicKey: 'UKEY' }));
    expect(shared.natsUsers.issue).not.toHaveBeenCalled();
    expect(plain.nats).toMatchObject({ user: 'control-plane', pass: 'secret' });
  });
});

describe('MachineRegistrationService: with an API token', () => {
  const principal = (role: Principal['role']): Principal => ({ workspaceId: 'w1', workspaceName: 'ops', tokenId: 't1', role });

  it('is an operator action: a workspace admin gets a 403 that points to join tokens', async () => {
    const { sut, machines } = await registrations();
    await expect(
      sut.register({ kind: 'api-token', principal: principal('admin') }, registration('gpu', { machineId: 'new-1' })),
    ).rejects.toMatchObject({
      status: 403,
      message: expect.stringMatching(/needs an operator token.*join token from tern machine create/),
    });
    expect(machines.transaction).not.toHaveBeenCalled();
  });

  it('creates the machine named in the body, and needs that name', async () => {
    const { sut, machines } = await registrations();
    await expect(sut.register({ kind: 'api-token', principal: principal('operator') }, registration('gpu'))).rejects.toMatchObject({
      status: 400,
    });
    const answer = await sut.register({ kind: 'api-token', principal: principal('operator') }, registration('gpu', { machineId: 'new-1' }));
    expect(machines.insertWithCredential).toHaveBeenCalledWith('new-1', 'gpu', hashToken(answer.machineToken!));
  });

  it("never replaces an existing machine's credential: a 409 that says how the agent registers instead", async () => {
    const { sut, machines, messaging } = await registrations();
    machines.insertWithCredential.mockResolvedValue(false);
    await expect(
      sut.register({ kind: 'api-token', principal: principal('operator') }, registration('gpu', { machineId: 'box-1' })),
    ).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/^machine "box-1" already exists: an API token never replaces/),
    });
    expect(machines.storeInventory).not.toHaveBeenCalled();
    expect(messaging.publish).not.toHaveBeenCalled();
  });
});
