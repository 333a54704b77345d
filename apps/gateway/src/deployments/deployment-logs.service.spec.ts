import { jest } from '@jest/globals';
import type { ServerResponse } from 'node:http';
import { TERN_CONFIG } from '#tern/config';
import { CONTAINER_LOG_LINE, type ContainerLogLine, subjectFor } from '#tern/contracts';
import { encode, Messaging, Namespace } from '#tern/messaging';
import type { Deployment } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { DeploymentLogsService } from './deployment-logs.service.js';
import { DeploymentsService } from './deployments.service.js';

const deployment = { id: 'd1', name: 'echo' } as Deployment;

/** A line as an agent publishes it: on its own machine's subject, `<namespace>.logs.<machine>.<deployment>.<container>.v1`. */
const published = (machineId: string, containerId: string, line: string) => ({
  subject: subjectFor(CONTAINER_LOG_LINE, machineId, 'd1', containerId),
  data: encode({ containerId, deploymentId: 'd1', stream: 'stdout', line, sequence: 0, at: '2026-01-01T00:00:00Z' }),
});

async function logs() {
  const { sut, fake } = await newTestService(DeploymentLogsService, [[TERN_CONFIG, { logs: { followsPerToken: 2 } }]]);
  return { sut, deployments: fake(DeploymentsService), messaging: fake(Messaging) };
}

/** Streams what the fake NATS subscription delivers, and answers the lines written out, in order. */
async function streamed(setup: Awaited<ReturnType<typeof logs>>, messages: ReturnType<typeof published>[], tail?: number) {
  const unsubscribe = jest.fn();
  const subscription = Object.assign(
    (async function* () {
      yield* messages;
    })(),
    { unsubscribe },
  );
  const subscribe = jest.fn(() => subscription);
  Object.assign(setup.messaging, { nc: { subscribe, flush: jest.fn(async () => undefined) }, ns: new Namespace('tern') });
  const written: string[] = [];
  const out = {
    writableEnded: false,
    writeHead: jest.fn(),
    write: jest.fn((chunk: string) => written.push(chunk)),
    end: jest.fn(() => (out.writableEnded = true)),
    on: jest.fn(),
  };
  await setup.sut.stream(deployment, out as unknown as ServerResponse, { follow: true, ...(tail ? { tail } : {}) });
  const lines = written.filter((w) => w.startsWith('event: line')).map((w) => (JSON.parse(w.split('data: ')[1]) as ContainerLogLine).line);
  return { lines, written, subscribe, unsubscribe, out };
}

describe('DeploymentLogsService.admit', () => {
  it('refuses a token more streams than LOG_FOLLOWS_PER_TOKEN with a 429, and gives the place back once a stream ends', async () => {
    const { sut } = await logs();
    const release = sut.admit('tok1');
    sut.admit('tok1');
    expect(() => sut.admit('tok1')).toThrow(
      expect.objectContaining({ status: 429, message: expect.stringMatching(/LOG_FOLLOWS_PER_TOKEN=2/) }),
    );
    // Another token has places of its own.
    expect(() => sut.admit('tok2')).not.toThrow();
    release();
    release();
    expect(() => sut.admit('tok1')).not.toThrow();
    expect(() => sut.admit('tok1')).toThrow(expect.objectContaining({ status: 429 }));
  });
});

describe('DeploymentLogsService.stream', () => {
  it("subscribes to the deployment's subjects only and says which containers it has before any line", async () => {
    const setup = await logs();
    setup.deployments.containerPlacements.mockResolvedValue([{ id: 'c-1', machineId: 'm-1' }]);
    const { written, subscribe, out } = await streamed(setup, []);
    expect(subscribe).toHaveBeenCalledWith(expect.stringMatching(/^tern\.logs\.\*\.d1\.\*/));
    expect(out.writeHead).toHaveBeenCalledWith(200, expect.objectContaining({ 'content-type': 'text/event-stream; charset=utf-8' }));
    expect(written[0]).toBe(
      `event: info\ndata: ${JSON.stringify({ deployment: 'echo', containers: ['c-1'], follow: true, stored: false })}\n\n`,
    );
  });

  it("relays only lines of the deployment's containers from the machine each is placed on", async () => {
    const setup = await logs();
    setup.deployments.containerPlacements.mockResolvedValue([
      { id: 'c-1', machineId: 'm-1' },
      { id: 'c-2', machineId: null },
    ]);
    const { lines } = await streamed(setup, [
      published('m-1', 'c-1', 'one'),
      published('m-2', 'c-1', 'written by another machine'),
      published('m-1', 'c-2', 'not placed yet'),
      published('m-1', 'c-9', 'not the deployment’s'),
      {
        subject: subjectFor(CONTAINER_LOG_LINE, 'm-1', 'd1', 'c-1'),
        data: encode({ containerId: 'c-1', deploymentId: 'd2', stream: 'stdout', line: 'x', sequence: 1, at: '2026-01-01T00:00:00Z' }),
      },
      published('m-1', 'c-1', 'two'),
    ]);
    expect(lines).toEqual(['one', 'two']);
  });

  it('looks the placements up again for a container it does not know: it may have been placed a moment ago', async () => {
    const setup = await logs();
    setup.deployments.containerPlacements.mockResolvedValueOnce([]).mockResolvedValue([{ id: 'c-new', machineId: 'm-1' }]);
    const { lines } = await streamed(setup, [published('m-1', 'c-new', 'hello')]);
    expect(lines).toEqual(['hello']);
    expect(setup.deployments.containerPlacements).toHaveBeenCalledTimes(2);
  });

  it('ends the stream after `tail` lines', async () => {
    const setup = await logs();
    setup.deployments.containerPlacements.mockResolvedValue([{ id: 'c-1', machineId: 'm-1' }]);
    const { lines, unsubscribe, out } = await streamed(
      setup,
      [published('m-1', 'c-1', 'a'), published('m-1', 'c-1', 'b'), published('m-1', 'c-1', 'c')],
      2,
    );
    expect(lines).toEqual(['a', 'b']);
    expect(unsubscribe).toHaveBeenCalled();
    expect(out.end).toHaveBeenCalledTimes(1);
  });
});
