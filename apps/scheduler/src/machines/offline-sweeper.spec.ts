import { type TernConfig, TERN_CONFIG } from '#tern/config';
import { Hearing, Messaging } from '#tern/messaging';
import { MachinesRepository, OFFLINE_SWEEP_BATCH, type OfflineMachine } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { OfflineSweeper } from './offline-sweeper.js';

const TTL_SECONDS = 30;

async function sweeper() {
  const config = { machines: { heartbeatTtlSeconds: TTL_SECONDS } } as TernConfig;
  const { sut, fake } = await newTestService(OfflineSweeper, [[TERN_CONFIG, config]]);
  const hearing = new Hearing();
  fake(Messaging).hearing.mockReturnValue(hearing);
  const machines = fake(MachinesRepository);
  machines.markOfflineOlderThan.mockResolvedValue([]);
  return { sut, hearing, machines };
}

describe('OfflineSweeper.sweep', () => {
  it('sends nothing offline before this replica has heard beats for a whole TTL (its own downtime is not the machines)', async () => {
    const { sut, hearing, machines } = await sweeper();
    expect(await sut.sweep()).toBe(0);
    hearing.began(Date.now() - (TTL_SECONDS - 1) * 1000);
    expect(await sut.sweep()).toBe(0);
    expect(machines.markOfflineOlderThan).not.toHaveBeenCalled();
    // A replica that has heard them for the whole TTL sweeps.
    const heard = await sweeper();
    heard.hearing.began(Date.now() - TTL_SECONDS * 1000);
    expect(await heard.sut.sweep()).toBe(0);
    expect(heard.machines.markOfflineOlderThan).toHaveBeenCalledWith(TTL_SECONDS);
  });

  it('sweeps again at once while a sweep fills its batch (a site lost at once), and stops at the first that does not', async () => {
    const { sut, hearing, machines } = await sweeper();
    hearing.began(Date.now() - TTL_SECONDS * 1000);
    const batch = (n: number, from: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `m-${from + i}`, pool: 'default', from: 'ready', reason: 'silent' }) as OfflineMachine);
    machines.markOfflineOlderThan
      .mockResolvedValueOnce(batch(OFFLINE_SWEEP_BATCH, 0))
      .mockResolvedValueOnce(batch(OFFLINE_SWEEP_BATCH, OFFLINE_SWEEP_BATCH))
      .mockResolvedValueOnce(batch(3, 2 * OFFLINE_SWEEP_BATCH));
    expect(await sut.sweep()).toBe(2 * OFFLINE_SWEEP_BATCH + 3);
    expect(machines.markOfflineOlderThan).toHaveBeenCalledTimes(3);
  });

  it('waits a whole TTL again after this replica was cut from NATS', async () => {
    const { sut, hearing, machines } = await sweeper();
    const now = Date.now();
    hearing.began(now - 10 * TTL_SECONDS * 1000);
    hearing.lost(now - 20_000);
    expect(await sut.sweep()).toBe(0);
    hearing.regained(now - 10_000);
    expect(await sut.sweep()).toBe(0);
    expect(machines.markOfflineOlderThan).not.toHaveBeenCalled();
    expect(sut.hearsLongEnough(now + TTL_SECONDS * 1000)).toBe(true);
  });
});
