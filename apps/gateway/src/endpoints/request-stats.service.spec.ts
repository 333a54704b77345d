import { EventEmitter } from 'node:events';
import type { DeploymentRecord } from '#tern/contracts';
import { DeploymentsRepository, type RequestMinute } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { RequestStats } from './request-stats.service.js';

const record = { deploymentId: 'd1', name: 'echo', version: 2 } as DeploymentRecord;

/** A response that ends with `status` once observed. */
function answer(stats: RequestStats, status: number) {
  const raw = Object.assign(new EventEmitter(), { statusCode: status });
  stats.observe(record, raw);
  raw.emit('close');
}

async function requestStats() {
  const { sut, fake } = await newTestService(RequestStats);
  const repo = fake(DeploymentsRepository);
  const stored = () => repo.addRequestMinutes.mock.calls.at(-1)![0] as RequestMinute[];
  return { sut, repo, stored };
}

describe('RequestStats', () => {
  it('adds the requests it saw answered, per version and minute, counting 5xx as errors', async () => {
    const { sut, stored } = await requestStats();
    answer(sut, 200);
    answer(sut, 503);
    answer(sut, 404);
    await sut.flush();
    expect(stored()).toEqual([expect.objectContaining({ deploymentId: 'd1', version: 2, requests: 3, errors: 1 })]);
    await sut.flush();
    expect(stored()).toEqual([]);
  });

  it('counts a request only once its response is done', async () => {
    const { sut, stored } = await requestStats();
    const raw = Object.assign(new EventEmitter(), { statusCode: 200 });
    sut.observe(record, raw);
    await sut.flush();
    expect(stored()).toEqual([]);
    raw.emit('close');
    await sut.flush();
    expect(stored()).toEqual([expect.objectContaining({ requests: 1 })]);
  });

  it('keeps the counts a failed write did not store for the next one', async () => {
    const { sut, repo, stored } = await requestStats();
    answer(sut, 200);
    repo.addRequestMinutes.mockRejectedValueOnce(new Error('connection terminated'));
    await expect(sut.flush()).rejects.toThrow('connection terminated');
    answer(sut, 200);
    await sut.flush();
    expect(stored()).toEqual([expect.objectContaining({ requests: 2 })]);
  });

  it('saves what it counted at shutdown, and shuts down even when that fails', async () => {
    const { sut, repo, stored } = await requestStats();
    sut.onApplicationBootstrap();
    answer(sut, 200);
    await sut.onApplicationShutdown();
    expect(stored()).toEqual([expect.objectContaining({ requests: 1 })]);
    repo.addRequestMinutes.mockRejectedValue(new Error('pool closed'));
    await expect(sut.onApplicationShutdown()).resolves.toBeUndefined();
  });
});
