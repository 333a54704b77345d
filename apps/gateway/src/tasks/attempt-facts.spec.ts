import { TASK_ATTEMPT_ENDED, TASK_ATTEMPTS_ENDED, type TaskAttemptEnded } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { batchMsgId } from '#tern/tasks';
import { fakeOf } from '../../../../test/support/test-service.js';
import { AttemptFacts } from './attempt-facts.js';

const fact = (taskId: string, attempt = 1): TaskAttemptEnded => ({
  taskId,
  attempt,
  workspaceId: 'w1',
  deploymentId: 'd1',
  machineId: 'm1',
  outcome: 'completed',
  endedAt: '2026-01-01T00:00:00.000Z',
});

describe('AttemptFacts', () => {
  it('tells a lone fact as task.attempt-ended, and facts told while one is on its way together, each attempt once per message', async () => {
    const messaging = fakeOf(Messaging);
    let release!: () => void;
    messaging.publish.mockImplementationOnce(() => new Promise((r) => (release = () => r({ seq: 1 } as never))));
    messaging.publish.mockResolvedValue({ seq: 2 } as never);
    const facts = new AttemptFacts(messaging);

    const first = facts.tell(fact('t1'));
    await new Promise((r) => setImmediate(r));
    // While t1's publish is in flight: three more, one of them t2's attempt again.
    const rest = [facts.tell(fact('t2')), facts.tell(fact('t3')), facts.tell(fact('t2'))];
    release();
    await Promise.all([first, ...rest]);

    const calls = messaging.publish.mock.calls;
    expect(calls[0]).toEqual([TASK_ATTEMPT_ENDED, fact('t1'), { msgId: 't1:ended:1' }]);
    const batch = [fact('t2'), fact('t3')];
    expect(calls[1]).toEqual([TASK_ATTEMPTS_ENDED, { attempts: batch }, { msgId: batchMsgId('attempts-ended', batch) }]);
    expect(calls[2]).toEqual([TASK_ATTEMPT_ENDED, fact('t2'), { msgId: 't2:ended:1' }]);
    expect(calls).toHaveLength(3);
  });

  it('rejects the callers whose fact could not be stored', async () => {
    const messaging = fakeOf(Messaging);
    messaging.publish.mockRejectedValue(new Error('no responders') as never);
    await expect(new AttemptFacts(messaging).tell(fact('t1'))).rejects.toThrow('no responders');
  });
});
