import { type TernConfig, TERN_CONFIG } from '#tern/config';
import { Hearing, Messaging } from '#tern/messaging';
import { MachinesRepository } from '#tern/persistence';
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
