import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AGENT_CONTAINER_START,
  AGENT_LOAD_REPORT,
  AGENT_TASK_CANCEL,
  CONTAINER_FAILED,
  CONTAINER_LOG_LINE,
  CONTAINER_READY,
  CONTAINER_SCHEDULED,
  CONTAINER_STARTED,
  CONTAINER_STARTING,
  CONTAINER_STOPPED,
  INVOKE,
  MACHINE_HEARTBEAT,
  MACHINE_NETWORK_TESTED,
  machineIdMismatch,
  NETWORK_TEST_ECHO,
  subjectTokensOf,
  TASK_COMPLETED,
  TASK_COMPLETED_MANY,
  TASK_FAILED,
  TASK_STARTED,
  SCALE_COMMAND,
  SCALE_DECISION,
  TASK_SUBMITTED,
  allContracts,
  findContract,
  subjectFilter,
  subjectFor,
  STREAMS,
  type StreamName,
} from './index.js';

/** NATS subject matching of a filter (with `*` and `>`) against a subject; a `*` in the subject is a token like any other. */
function covers(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '>') return s.length > i;
    if (i >= s.length || (f[i] !== '*' && f[i] !== s[i])) return false;
  }
  return f.length === s.length;
}

function streamsCovering(subject: string): StreamName[] {
  return Object.values(STREAMS)
    .filter((s) => s.subjects.some((filter) => covers(filter, subject)))
    .map((s) => s.name);
}

describe('covers (the spec helper)', () => {
  it('follows NATS wildcard rules', () => {
    expect(covers('tern.task.>', 'tern.task.submitted.w-1.v1')).toBe(true);
    expect(covers('tern.task.>', 'tern.task')).toBe(false);
    expect(covers('tern.task.>', 'tern.tasks.*.v1')).toBe(false);
    expect(covers('tern.*.v1', 'tern.x.v1')).toBe(true);
    expect(covers('tern.*.v1', 'tern.x.y.v1')).toBe(false);
  });
});

describe('subjectFor', () => {
  it('fills the * tokens in order', () => {
    expect(subjectFor(MACHINE_HEARTBEAT, 'm-1')).toBe('tern.heartbeat.m-1.v1');
    expect(subjectFor(AGENT_CONTAINER_START, 'gpu_box_7')).toBe('tern.agent.gpu_box_7.container.start.v1');
    expect(subjectFor(SCALE_DECISION)).toBe('tern.scale.decision.v1');
    expect(subjectFor(TASK_SUBMITTED, 'w-1')).toBe('tern.task.submitted.w-1.v1');
  });

  it('rejects a wrong number of values', () => {
    expect(() => subjectFor(SCALE_COMMAND)).toThrow('needs 1 value(s), got 0');
    expect(() => subjectFor(SCALE_DECISION, 'extra')).toThrow('needs 0 value(s), got 1');
  });

  it.each(['', 'a.b', 'a*', 'a>', 'a b'])('rejects the token %j', (token) => {
    expect(() => subjectFor(MACHINE_HEARTBEAT, token)).toThrow('invalid subject token');
  });
});

describe('subjectFilter', () => {
  it('fills the given tokens and leaves the others *', () => {
    expect(subjectFilter(CONTAINER_LOG_LINE, undefined, 'dep-1', undefined)).toBe('tern.logs.*.dep-1.*.v1');
    expect(subjectFilter(CONTAINER_LOG_LINE, 'm-1', 'dep-1', 'c-1')).toBe(subjectFor(CONTAINER_LOG_LINE, 'm-1', 'dep-1', 'c-1'));
  });

  it('checks the count and every given token as subjectFor does', () => {
    expect(() => subjectFilter(CONTAINER_LOG_LINE, 'dep-1')).toThrow('needs 3 value(s), got 1');
    expect(() => subjectFilter(CONTAINER_LOG_LINE, undefined, 'a.b', undefined)).toThrow('invalid subject token');
  });
});

describe('findContract', () => {
  it('matches a concrete subject to its pattern', () => {
    expect(findContract('tern.heartbeat.m-1.v1')).toBe(MACHINE_HEARTBEAT);
    expect(findContract('tern.agent.m-1.container.start.v1')).toBe(AGENT_CONTAINER_START);
    expect(findContract('tern.command.scale.dep-9.v1')).toBe(SCALE_COMMAND);
  });

  it('finds a pattern itself and nothing for unknown subjects', () => {
    expect(findContract('tern.heartbeat.*.v1')).toBe(MACHINE_HEARTBEAT);
    expect(findContract('tern.heartbeat.m-1.v2')).toBeUndefined();
    expect(findContract('tern.nothing.v1')).toBeUndefined();
  });

  it('maps every registered subject, filled in, back to its own contract', () => {
    for (const c of allContracts()) {
      const filled = subjectFor(
        c,
        ...c.subject
          .split('.')
          .filter((t) => t === '*')
          .map((_, i) => `id${i}`),
      );
      expect(findContract(filled)).toBe(c);
    }
  });
});

describe('subjects that name a machine', () => {
  /** Facts about one machine (sent by its agent, or by the scheduler about it): NATS lets a machine publish only those naming itself. */
  const fromMachines = [
    MACHINE_HEARTBEAT,
    MACHINE_NETWORK_TESTED,
    CONTAINER_STARTING,
    CONTAINER_STARTED,
    CONTAINER_READY,
    CONTAINER_FAILED,
    CONTAINER_STOPPED,
    CONTAINER_SCHEDULED,
    TASK_STARTED,
    TASK_COMPLETED,
    TASK_COMPLETED_MANY,
    TASK_FAILED,
    AGENT_LOAD_REPORT,
  ];

  it.each(fromMachines.map((c) => [c.subject, c]))('%s carries the machine id as its third token and in its payload', (subject, c) => {
    expect(subject.split('.')[2]).toBe('*');
    expect(c.machineIdField).toBe('machineId');
  });

  it('puts what an agent hears under tern.agent.<machine id>.>', () => {
    for (const c of [AGENT_CONTAINER_START, INVOKE, AGENT_TASK_CANCEL]) expect(c.subject).toMatch(/^tern\.agent\.\*\./);
    expect(subjectFor(INVOKE, 'm-1', 'c-1')).toBe('tern.agent.m-1.invoke.c-1.v1');
    expect(subjectFor(NETWORK_TEST_ECHO, 'm-1')).toBe('tern.nettest.m-1.echo.v1');
  });

  it('takes the machine token from the payload unless every token is given', () => {
    expect(subjectTokensOf(TASK_STARTED, { machineId: 'm-1' })).toEqual(['m-1']);
    expect(subjectTokensOf(AGENT_LOAD_REPORT, { machineId: 'm-1' }, ['dep-1'])).toEqual(['m-1', 'dep-1']);
    expect(subjectTokensOf(TASK_STARTED, { machineId: 'm-1' }, ['m-2'])).toEqual(['m-2']);
    expect(subjectTokensOf(INVOKE, {}, ['m-1', 'c-1'])).toEqual(['m-1', 'c-1']);
    expect(() => subjectTokensOf(TASK_STARTED, {})).toThrow('the payload has no machineId');
  });

  it('says why a payload naming another machine than its subject cannot be believed', () => {
    expect(machineIdMismatch(TASK_COMPLETED, 'tern.task.m-1.completed.v1', { machineId: 'm-1' })).toBeUndefined();
    expect(machineIdMismatch(TASK_COMPLETED, 'tern.task.m-1.completed.v1', { machineId: 'm-2' })).toBe(
      'machineId "m-2" differs from the machine "m-1" of its subject tern.task.m-1.completed.v1',
    );
    expect(machineIdMismatch(AGENT_CONTAINER_START, 'tern.agent.m-1.container.start.v1', { machineId: 'm-2' })).toBeUndefined();
  });
});

describe('the registry', () => {
  const contracts = allContracts();

  it('holds every contract defined under src (each message module is exported by messages.ts)', () => {
    const root = fileURLToPath(new URL('.', import.meta.url));
    const sources = readdirSync(root, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))
      .map((f) => readFileSync(join(root, f), 'utf8'));
    const defined = sources.reduce((n, text) => n + (text.match(/= defineContract\(/g)?.length ?? 0), 0);
    expect(contracts).toHaveLength(defined);
    expect(defined).toBeGreaterThan(0);
  });

  it.each(allContracts().map((c) => [c.subject, c]))('%s is rooted at tern. and versioned', (subject) => {
    expect(subject).toMatch(/^tern\.([a-z0-9-]+|\*)(\.([a-z0-9-]+|\*))*\.v\d+$/);
    expect(subject.split('.').slice(1, -1)).not.toContain('>');
  });

  it('describes every contract', () => {
    for (const c of contracts) expect(c.description.length).toBeGreaterThan(40);
  });

  it('puts every streamed subject inside its stream, and only there', () => {
    for (const c of contracts.filter((x) => x.stream)) {
      expect({ subject: c.subject, streams: streamsCovering(c.subject) }).toEqual({ subject: c.subject, streams: [c.stream] });
    }
  });

  it('keeps core NATS subjects out of every stream (a stream would swallow requests and store ephemeral data)', () => {
    for (const c of contracts.filter((x) => !x.stream)) {
      expect({ subject: c.subject, streams: streamsCovering(c.subject) }).toEqual({ subject: c.subject, streams: [] });
    }
  });

  it('gives request contracts a reply class and no stream, and others no reply', () => {
    for (const c of contracts) {
      if (c.kind === 'request') {
        expect({ subject: c.subject, reply: typeof c.reply, stream: c.stream }).toEqual({
          subject: c.subject,
          reply: 'function',
          stream: undefined,
        });
      } else {
        expect({ subject: c.subject, reply: c.reply }).toEqual({ subject: c.subject, reply: undefined });
      }
    }
  });

  it('sends commands through a work-queue stream', () => {
    for (const c of contracts.filter((x) => x.kind === 'command')) {
      expect(c.stream && STREAMS[c.stream].retention).toBe('workqueue');
    }
  });

  it('lets no two streams overlap', () => {
    const filters = Object.values(STREAMS).flatMap((s) => s.subjects.map((f) => ({ stream: s.name, f })));
    for (const a of filters) {
      for (const b of filters) {
        if (a.stream !== b.stream) expect(covers(a.f, b.f.replace(/>$/, 'x'))).toBe(false);
      }
    }
  });
});
