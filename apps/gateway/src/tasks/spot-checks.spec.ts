import 'reflect-metadata';
import { createHash } from 'node:crypto';
import {
  AGENT_TASK_SPOT_CHECK,
  type DeploymentSpec,
  resolveSpec,
  TASK_SPOT_CHECK_ENDED,
  type TaskSpotChecked,
  type TaskSpotCheckRecord,
} from '#tern/contracts';
import { register } from 'prom-client';
import { Messaging } from '#tern/messaging';
import { MachineVerificationRepository, TasksRepository, type TaskWithDeployment } from '#tern/persistence';
import { type Fake, newTestService } from '../../../../test/support/test-service.js';
import { RoutesMirror } from '../endpoints/routes-mirror.js';
import { ReputationReader } from '../machines/reputation-reader.js';
import { SpotChecks } from './spot-checks.js';

const sha = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;
const spec = resolveSpec({
  name: 'q',
  kind: 'task_queue',
  handler: 'app.py:run',
  code: `sha256:${'a'.repeat(64)}`,
  verify: { sample: 1 },
} as DeploymentSpec);
const task = { id: 't-1', workspaceId: 'w-1', deploymentId: 'd-1', version: 1, timeoutSeconds: 60, resultRef: null } as TaskWithDeployment;
const route = (machineId: string) => ({
  containerId: `c-${machineId}`,
  deploymentId: 'd-1',
  version: 1,
  machineId,
  capacity: 1,
  readyAt: '',
});
const pending: TaskSpotCheckRecord = {
  state: 'pending',
  machineId: 'm-liar',
  attempt: 1,
  resultSha256: sha('{"square":5}'),
  verifierMachineId: 'm-honest',
  verifierContainerId: 'c-m-honest',
  requestedAt: '2026-01-01T00:00:00.000Z',
};
const answer = (over: Partial<TaskSpotChecked> = {}): TaskSpotChecked => ({
  taskId: 't-1',
  workspaceId: 'w-1',
  deploymentId: 'd-1',
  machineId: 'm-honest',
  containerId: 'c-m-honest',
  outcome: 'ok',
  resultSha256: sha('{"square":4}'),
  at: '2026-01-01T00:00:01.000Z',
  ...over,
});

async function spotChecks(scores: Record<string, number>, verified: string[]) {
  const { sut, fake } = await newTestService(SpotChecks);
  fake(RoutesMirror).record.mockReturnValue({ spec } as never);
  fake(RoutesMirror).routesOf.mockReturnValue([route('m-liar'), route('m-honest')]);
  fake(ReputationReader).current.mockResolvedValue(new Map(Object.entries(scores).map(([id, score]) => [id, { score } as never])));
  fake(MachineVerificationRepository).verifiedAmong.mockResolvedValue(new Set(verified));
  fake(TasksRepository).beginSpotCheck.mockResolvedValue({ payload: { n: 2 } });
  return { sut, tasks: fake(TasksRepository), messaging: fake(Messaging), table: fake(RoutesMirror) };
}

/** A pending check that settles as asked (the repository's conditional UPDATE, when the verifier matches). */
function settlesPending(tasks: Fake<TasksRepository>) {
  tasks.spotCheckOf.mockResolvedValue({ workspaceId: 'w-1', deploymentId: 'd-1', spotCheck: pending });
  tasks.settleSpotCheck.mockImplementation(async (_id, _v, change) => ({
    workspaceId: 'w-1',
    deploymentId: 'd-1',
    spotCheck: { ...pending, ...change },
  }));
}

describe('SpotChecks', () => {
  it('asks the verified machine of higher reputation alone, with the digest of the result as kept', async () => {
    const { sut, tasks, messaging } = await spotChecks({ 'm-liar': 0.9, 'm-honest': 0.95 }, ['m-liar', 'm-honest']);
    await sut.consider(task, 1, 'm-liar', '{"square":5}');
    expect(tasks.beginSpotCheck).toHaveBeenCalledWith(
      't-1',
      expect.objectContaining({ state: 'pending', machineId: 'm-liar', resultSha256: sha('{"square":5}'), verifierMachineId: 'm-honest' }),
    );
    expect(messaging.emit).toHaveBeenCalledWith(
      AGENT_TASK_SPOT_CHECK,
      expect.objectContaining({ taskId: 't-1', containerId: 'c-m-honest', attempt: 1, payload: { n: 2 } }),
      ['m-honest'],
    );
  });

  it('records a check no machine could make as skipped, and asks nobody', async () => {
    const { sut, tasks, messaging } = await spotChecks({ 'm-liar': 0.97, 'm-honest': 0.95 }, ['m-liar', 'm-honest']);
    await sut.consider(task, 1, 'm-liar', '{"square":5}');
    expect(tasks.beginSpotCheck).toHaveBeenCalledWith(
      't-1',
      expect.objectContaining({ state: 'skipped', reason: expect.stringMatching(/above/) }),
    );
    expect(messaging.emit).not.toHaveBeenCalled();
  });

  it('draws nothing for a deployment that did not ask', async () => {
    const { sut, tasks, table } = await spotChecks({}, []);
    table.record.mockReturnValue({ spec: { ...spec, verify: undefined } } as never);
    await sut.consider(task, 1, 'm-liar', '{}');
    expect(tasks.beginSpotCheck).not.toHaveBeenCalled();
  });

  it('believes an answer only from the machine and container it asked', async () => {
    const { sut, tasks, messaging } = await spotChecks({}, []);
    tasks.spotCheckOf.mockResolvedValue({ workspaceId: 'w-1', deploymentId: 'd-1', spotCheck: pending });
    for (const wrong of [answer({ machineId: 'm-liar', containerId: 'c-m-liar' }), answer({ containerId: 'c-other' })])
      expect(await sut.answered(wrong)).toEqual({ accepted: false, detail: expect.stringMatching(/was not asked to check task t-1/) });
    expect(tasks.settleSpotCheck).not.toHaveBeenCalled();
    expect(messaging.publish).not.toHaveBeenCalled();
  });

  it('settles a differing digest as disagreed and tells reputation against the machine checked', async () => {
    const { sut, tasks, messaging } = await spotChecks({}, []);
    settlesPending(tasks);
    expect(await sut.answered(answer())).toEqual({ accepted: true });
    expect(tasks.settleSpotCheck).toHaveBeenCalledWith(
      't-1',
      { machineId: 'm-honest', containerId: 'c-m-honest' },
      expect.objectContaining({ state: 'disagreed', verifierSha256: sha('{"square":4}') }),
    );
    expect(messaging.publish).toHaveBeenCalledWith(
      TASK_SPOT_CHECK_ENDED,
      expect.objectContaining({ taskId: 't-1', machineId: 'm-liar', verifierMachineId: 'm-honest', verdict: 'disagreed' }),
      { msgId: 't-1:spot-check-ended' },
    );
  });

  it('settles an equal digest as agreed, and a run without a result as failed, telling reputation nothing then', async () => {
    const { sut, tasks, messaging } = await spotChecks({}, []);
    settlesPending(tasks);
    await sut.answered(answer({ resultSha256: pending.resultSha256 }));
    expect(messaging.publish).toHaveBeenLastCalledWith(
      TASK_SPOT_CHECK_ENDED,
      expect.objectContaining({ verdict: 'agreed' }),
      expect.anything(),
    );
    messaging.publish.mockClear();
    await sut.answered(answer({ outcome: 'error', resultSha256: undefined, error: 'boom' }));
    expect(tasks.settleSpotCheck).toHaveBeenLastCalledWith('t-1', expect.anything(), expect.objectContaining({ state: 'failed' }));
    expect(messaging.publish).not.toHaveBeenCalled();
  });

  it('tells a settled verdict again when its answer is delivered again (same message id)', async () => {
    const { sut, tasks, messaging } = await spotChecks({}, []);
    const settled = { ...pending, state: 'disagreed' as const, checkedAt: '2026-01-01T00:00:02.000Z' };
    tasks.spotCheckOf.mockResolvedValue({ workspaceId: 'w-1', deploymentId: 'd-1', spotCheck: settled });
    tasks.settleSpotCheck.mockResolvedValue(undefined);
    expect(await sut.answered(answer())).toEqual({ accepted: true });
    expect(messaging.publish).toHaveBeenCalledWith(
      TASK_SPOT_CHECK_ENDED,
      expect.objectContaining({ verdict: 'disagreed', at: settled.checkedAt }),
      { msgId: 't-1:spot-check-ended' },
    );
  });

  it('counts each verdict once, by the answer that settled it, never a redelivery', async () => {
    const count = async (outcome: string) =>
      (await register.getSingleMetric('tern_spot_checks_total')?.get())?.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
    const { sut, tasks } = await spotChecks({}, []);
    settlesPending(tasks);
    const before = await count('disagreed');
    await sut.answered(answer());
    expect(await count('disagreed')).toBe(before + 1);
    tasks.settleSpotCheck.mockResolvedValue(undefined);
    await sut.answered(answer());
    expect(await count('disagreed')).toBe(before + 1);
  });

  it('changes nothing and tells nothing when the answer comes after the check expired', async () => {
    const { sut, tasks, messaging } = await spotChecks({}, []);
    const expired = { ...pending, state: 'expired' as const, reason: 'no answer', checkedAt: '2026-01-01T00:05:00.000Z' };
    tasks.spotCheckOf.mockResolvedValue({ workspaceId: 'w-1', deploymentId: 'd-1', spotCheck: expired });
    tasks.settleSpotCheck.mockResolvedValue(undefined);
    expect(await sut.answered(answer())).toEqual({ accepted: true });
    expect(messaging.publish).not.toHaveBeenCalled();
  });
});
