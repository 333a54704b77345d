import { Readable } from 'node:stream';
import { TASK_PAYLOAD_MAX_BYTES } from '#tern/contracts';
import { MapsRepository, type StagedChunk } from '#tern/persistence';
import { ApiError } from '#tern/service';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { TaskSubmissionService } from '../tasks/task-submission.service.js';
import { MapsService } from './maps.service.js';

const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 't1', role: 'admin' };

async function maps() {
  const { sut, fake } = await newTestService(MapsService);
  const submissions = fake(TaskSubmissionService);
  submissions.queue.mockResolvedValue({
    workspaceId: 'w1',
    deploymentId: 'd1',
    name: 'square',
    version: 3,
    spec: { taskPolicy: { maxRetries: 2, timeoutSeconds: 60 } },
  } as never);
  const repo = fake(MapsRepository);
  repo.unsentTasks.mockResolvedValue([]);
  const staged: StagedChunk[] = [];
  repo.stage.mockImplementation(async (_id, chunks) => void staged.push(...chunks));
  return { sut, repo, staged };
}

const body = (text: string) => Readable.from([Buffer.from(text)]);

describe('MapsService.start', () => {
  it('cuts the inputs into chunks of chunk_size, in input order, and accepts the map with its total', async () => {
    const { sut, repo, staged } = await maps();
    const inputs = Array.from({ length: 7 }, (_, i) => ({ x: i }));
    const started = await sut.start(principal, 'square', undefined, body(JSON.stringify(inputs)), { chunk_size: 3 });
    expect(started).toMatchObject({ total: 7, chunks: 3, chunk_size: 3, function: 'square', version: 3 });
    expect(staged.map((c) => [c.chunk, c.firstIndex, c.inputs.length])).toEqual([
      [0, 0, 3],
      [1, 3, 3],
      [2, 6, 1],
    ]);
    expect(staged.flatMap((c) => c.inputs)).toEqual(inputs);
    expect(repo.accept).toHaveBeenCalledWith(started.map_id, 7);
    // The deployment's task policy, unless the query says otherwise.
    expect(repo.create).toHaveBeenCalledWith(expect.objectContaining({ maxRetries: 2, timeoutSeconds: 60, order: 'input' }));
  });

  it('refuses an empty map with a 400 saying what to send, and discards what it created', async () => {
    const { sut, repo } = await maps();
    const refused = sut.start(principal, 'square', undefined, body('[]'), {});
    await expect(refused).rejects.toThrow(ApiError);
    await expect(refused).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/no inputs: send a JSON array/) });
    expect(repo.discard).toHaveBeenCalledTimes(1);
    expect(repo.accept).not.toHaveBeenCalled();
  });

  it('refuses a chunk over the task payload limit with a 413 naming the chunk and what to lower', async () => {
    const { sut, repo } = await maps();
    const big = 'x'.repeat(TASK_PAYLOAD_MAX_BYTES / 3);
    const inputs = [{ small: 1 }, { small: 2 }, { big }, { big }, { big }, { big }, { big }];
    const refused = sut.start(principal, 'square', undefined, body(JSON.stringify(inputs)), { chunk_size: 5 });
    await expect(refused).rejects.toMatchObject({ status: 413, message: expect.stringMatching(/^chunk 0 .* lower chunk_size$/) });
    expect(repo.discard).toHaveBeenCalledTimes(1);
  });

  it('answers a body cut short with a 400 that says nothing started', async () => {
    const { sut, repo } = await maps();
    const cut = new Readable({
      read() {
        this.push(Buffer.from('[{"x":1},'));
        this.destroy(new Error('aborted'));
      },
    });
    await expect(sut.start(principal, 'square', undefined, cut, {})).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/nothing was started/),
    });
    expect(repo.discard).toHaveBeenCalledTimes(1);
  });
});
