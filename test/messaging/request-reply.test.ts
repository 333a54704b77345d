import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import { AGENT_CONTAINER_STOP, subjectFor } from '#tern/contracts';
import { connectNats, Messaging, Namespace, ReplyError, RequestError } from '#tern/messaging';
import { TEST_NATS, uniqueName } from '../support/isolation.js';

const quiet = new Logger('test');
quiet.log = quiet.warn = quiet.error = () => undefined;

describe('request/reply on core NATS', () => {
  let nc: NatsConnection;
  let messaging: Messaging;

  beforeAll(async () => {
    nc = await connectNats({ ...TEST_NATS, name: 'rr-test' }, quiet);
    messaging = new Messaging(nc, new Namespace(uniqueName('rr')));
  });
  afterAll(() => nc.close());

  it('validates the request, answers with the reply, and carries error codes', async () => {
    const sub = messaging.serve(AGENT_CONTAINER_STOP, 'agents', async (req, subject) => {
      if (req.containerId === 'missing') throw new ReplyError(404, `no container ${req.containerId}`);
      return { accepted: true, reason: `stopping on ${subject.split('.')[2]}` };
    });
    try {
      const reply = await messaging.request(AGENT_CONTAINER_STOP, { containerId: 'c1', graceSeconds: 5, reason: 'test' } as never, {
        tokens: ['m1'],
      });
      expect(reply).toMatchObject({ accepted: true, reason: 'stopping on m1' });

      const missing = messaging.request(AGENT_CONTAINER_STOP, { containerId: 'missing', graceSeconds: 5, reason: 'test' } as never, {
        tokens: ['m1'],
      });
      await expect(missing).rejects.toMatchObject({ code: 404, message: 'no container missing' });

      const invalid = messaging.request(AGENT_CONTAINER_STOP, { containerId: 7 } as never, { tokens: ['m1'] });
      await expect(invalid).rejects.toBeInstanceOf(RequestError);
      await expect(invalid).rejects.toMatchObject({ code: 400 });
    } finally {
      sub.unsubscribe();
    }
  });

  it('serves only the concrete subject when given tokens (an agent answers for its own machine id)', async () => {
    const sub = messaging.serve(AGENT_CONTAINER_STOP, 'agents', async (_req, subject) => ({ accepted: true, reason: subject }), ['m1']);
    try {
      const mine = await messaging.request(AGENT_CONTAINER_STOP, { containerId: 'c1', graceSeconds: 5, reason: 'x' } as never, {
        tokens: ['m1'],
      });
      expect(mine).toMatchObject({ accepted: true, reason: subjectFor(AGENT_CONTAINER_STOP, 'm1') });
      const other = messaging.request(AGENT_CONTAINER_STOP, { containerId: 'c1', graceSeconds: 5, reason: 'x' } as never, {
        tokens: ['m2'],
        timeoutMs: 1000,
      });
      await expect(other).rejects.toMatchObject({ code: 503 });
    } finally {
      sub.unsubscribe();
    }
  });

  it('reports 503 when nobody serves the subject', async () => {
    const none = messaging.request(AGENT_CONTAINER_STOP, { containerId: 'c1', graceSeconds: 5, reason: 'x' } as never, {
      tokens: ['nobody'],
      timeoutMs: 1000,
    });
    await expect(none).rejects.toMatchObject({ code: 503 });
  });
});
