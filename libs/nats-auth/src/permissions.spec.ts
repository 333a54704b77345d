import { BUCKET_ACCESS, CONTRACT_ACCESS, type NatsPrincipal, subjectFor } from '#tern/contracts';
import {
  inboxPrefix,
  integratorInbox,
  integratorPermissions,
  matches,
  permissionsFor,
  presenceReplies,
  subjectAllowed,
  taskPermitPermissions,
} from './permissions.js';

const ns = 'acme';
const machine = (id: string) => permissionsFor('agent', { namespace: ns, machineId: id });
const wire = (subject: string) => `${ns}${subject.slice('tern'.length)}`;
/** A contract's subject with each `*` filled: the machine id for machine-scoped subjects, else `x`. */
const filled = (subject: string, machineId = 'm1') =>
  subject
    .split('.')
    .map((t, i) => (t !== '*' ? t : i === 2 ? machineId : 'x'))
    .join('.');

describe('permissionsFor', () => {
  it('matches subjects like NATS', () => {
    expect(matches('a.*.c', 'a.b.c')).toBe(true);
    expect(matches('a.>', 'a.b.c')).toBe(true);
    expect(matches('a.>', 'a')).toBe(false);
    expect(matches('a.*', 'a.b.c')).toBe(false);
  });

  it('lets each principal publish and subscribe what the table gives it, and nothing the table does not', () => {
    const principals: NatsPrincipal[] = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation', 'agent'];
    for (const p of principals) {
      const perms = p === 'agent' ? machine('m1') : permissionsFor(p, { namespace: ns });
      for (const a of CONTRACT_ACCESS) {
        const subject = wire(filled(a.contract.subject));
        expect([p, a.contract.subject, 'pub', subjectAllowed(perms, 'pub', subject)]).toEqual([
          p,
          a.contract.subject,
          'pub',
          a.publish.includes(p),
        ]);
        expect([p, a.contract.subject, 'sub', subjectAllowed(perms, 'sub', subject)]).toEqual([
          p,
          a.contract.subject,
          'sub',
          a.subscribe.includes(p),
        ]);
      }
    }
  });

  it('gives KV and object-store writes only to writers', () => {
    for (const b of BUCKET_ACCESS) {
      const put = b.kind === 'kv' ? `$KV.${ns}_${b.bucket.name}.key` : `$O.${ns}_${b.bucket.name}.C.x`;
      for (const p of ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'] as const) {
        expect([b.bucket.name, p, subjectAllowed(permissionsFor(p, { namespace: ns }), 'pub', put)]).toEqual([
          b.bucket.name,
          p,
          b.write.includes(p),
        ]);
      }
      expect([b.bucket.name, subjectAllowed(machine('m1'), 'pub', put)]).toEqual([b.bucket.name, b.write.includes('agent')]);
    }
  });

  it("leaves reputation's facts to the control plane: no machine says a fault, reputation hears no machine's network test", () => {
    // A machine cannot clear itself or blame another: only the scheduler publishes faults.
    for (const id of ['m1', 'm2']) expect(subjectAllowed(machine('m1'), 'pub', `acme.machine.${id}.fault.v1`)).toBe(false);
    expect(subjectAllowed(permissionsFor('scheduler', { namespace: ns }), 'pub', 'acme.machine.m1.fault.v1')).toBe(true);
    expect(subjectAllowed(permissionsFor('reputation', { namespace: ns }), 'sub', 'acme.machine.m1.fault.v1')).toBe(true);
    expect(subjectAllowed(permissionsFor('reputation', { namespace: ns }), 'sub', 'acme.machine.m1.network-tested.v1')).toBe(false);
  });

  it('keeps a machine to its own id, its own inbox, and no stream administration', () => {
    const m1 = machine('m1');
    expect(subjectAllowed(m1, 'pub', 'acme.heartbeat.m1.v1')).toBe(true);
    expect(subjectAllowed(m1, 'pub', 'acme.heartbeat.m2.v1')).toBe(false);
    // Core NATS beats: its own subject only; hearing beats is the scheduler's and reputation's alone.
    expect(subjectAllowed(m1, 'pub', 'acme.beat.m1.v1')).toBe(true);
    expect(subjectAllowed(m1, 'pub', 'acme.beat.m2.v1')).toBe(false);
    expect(subjectAllowed(m1, 'pub', 'acme.beat.*.v1')).toBe(false);
    expect(subjectAllowed(m1, 'sub', 'acme.beat.m1.v1')).toBe(false);
    expect(subjectAllowed(m1, 'sub', 'acme.beat.*.v1')).toBe(false);
    for (const p of ['scheduler', 'reputation'] as const)
      expect(subjectAllowed(permissionsFor(p, { namespace: ns }), 'sub', 'acme.beat.*.v1')).toBe(true);
    for (const p of ['metering', 'autoscaler'] as const)
      expect(subjectAllowed(permissionsFor(p, { namespace: ns }), 'sub', 'acme.beat.*.v1')).toBe(false);
    expect(subjectAllowed(m1, 'sub', 'acme.agent.m1.container.start.v1')).toBe(true);
    expect(subjectAllowed(m1, 'sub', 'acme.agent.m2.container.start.v1')).toBe(false);
    expect(subjectAllowed(m1, 'sub', `${inboxPrefix(ns, 'agent', 'm1')}.abc`)).toBe(true);
    expect(subjectAllowed(m1, 'sub', `${inboxPrefix(ns, 'agent', 'm2')}.abc`)).toBe(false);
    expect(subjectAllowed(m1, 'sub', '_INBOX.abc')).toBe(false);
    expect(subjectAllowed(m1, 'sub', `${inboxPrefix(ns, 'gateway')}.abc`)).toBe(false);
    for (const s of [
      '>',
      'acme.>',
      '$JS.API.STREAM.DELETE.acme_EVENTS',
      '$JS.API.STREAM.PURGE.acme_TASKS',
      '$KV.acme_routes.c1',
      '$KV.acme_reputation.m1',
    ]) {
      expect([s, subjectAllowed(m1, 'sub', s) || subjectAllowed(m1, 'pub', s)]).toEqual([s, false]);
    }
    // No JetStream consumer API at all on its own user (tasks come through task permits), no task subject.
    for (const s of [
      '$JS.API.CONSUMER.MSG.NEXT.acme_TASKS.tasks-d1-v1',
      '$JS.API.CONSUMER.INFO.acme_TASKS.tasks-d1-v1',
      '$JS.ACK.acme_TASKS.tasks-d1-v1.1.1.1.1.0',
      '$JS.API.DIRECT.GET.acme_TASKS',
      '$JS.API.STREAM.MSG.GET.acme_EVENTS',
      '$JS.API.CONSUMER.CREATE.acme_EVENTS',
      '$JS.API.CONSUMER.DELETE.acme_TASKS.tasks-d1-v1',
      '$JS.API.CONSUMER.MSG.NEXT.acme_EVENTS.x',
    ]) {
      expect([s, subjectAllowed(m1, 'pub', s)]).toEqual([s, false]);
    }
    expect(subjectAllowed(m1, 'sub', 'acme.tasks.d1.1.v1')).toBe(false);
    // Its own heartbeat entry only: a direct get of its key, no consumer on the bucket's stream.
    expect(subjectAllowed(m1, 'pub', '$JS.API.DIRECT.GET.KV_acme_heartbeats.$KV.acme_heartbeats.m1')).toBe(true);
    for (const s of [
      '$JS.API.DIRECT.GET.KV_acme_heartbeats.$KV.acme_heartbeats.m2',
      '$JS.API.DIRECT.GET.KV_acme_heartbeats',
      '$JS.API.STREAM.MSG.GET.KV_acme_heartbeats',
      '$JS.API.CONSUMER.CREATE.KV_acme_heartbeats',
      '$JS.API.STREAM.CREATE.KV_acme_heartbeats',
    ])
      expect([s, subjectAllowed(m1, 'pub', s)]).toEqual([s, false]);
    // Its own state changes only.
    expect(subjectAllowed(m1, 'sub', 'acme.machine.m1.state-changed.v1')).toBe(true);
    expect(subjectAllowed(m1, 'sub', 'acme.machine.m2.state-changed.v1')).toBe(false);
    expect(subjectAllowed(m1, 'pub', wire(subjectFor(CONTRACT_ACCESS[0].contract, 'm1')))).toBe(false);
  });

  it('lets no service delete a stream or touch another namespace', () => {
    for (const p of ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'] as const) {
      const perms = permissionsFor(p, { namespace: ns });
      expect(subjectAllowed(perms, 'pub', '$JS.API.STREAM.DELETE.acme_EVENTS')).toBe(false);
      expect(perms.pub.allow.filter((s) => s.startsWith('other.'))).toEqual([]);
      expect(subjectAllowed(perms, 'sub', '_INBOX.x')).toBe(false);
    }
  });

  it("lets only the gateway delete a message from TASKS (a cancelled or expired task's), and from no other stream", () => {
    const gateway = permissionsFor('gateway', { namespace: ns });
    expect(subjectAllowed(gateway, 'pub', '$JS.API.STREAM.MSG.DELETE.acme_TASKS')).toBe(true);
    expect(subjectAllowed(gateway, 'pub', '$JS.API.STREAM.MSG.DELETE.acme_EVENTS')).toBe(false);
    expect(subjectAllowed(gateway, 'pub', '$JS.API.STREAM.PURGE.acme_TASKS')).toBe(false);
    for (const p of ['scheduler', 'autoscaler', 'metering', 'reputation'] as const)
      expect(subjectAllowed(permissionsFor(p, { namespace: ns }), 'pub', '$JS.API.STREAM.MSG.DELETE.acme_TASKS')).toBe(false);
    expect(subjectAllowed(permissionsFor('agent', { namespace: ns, machineId: 'm1' }), 'pub', '$JS.API.STREAM.MSG.DELETE.acme_TASKS')).toBe(
      false,
    );
  });

  it("lets the gateway erase a heartbeat entry (a deleted machine's) by its sequence, but neither write one nor purge the bucket", () => {
    const gateway = permissionsFor('gateway', { namespace: ns });
    expect(subjectAllowed(gateway, 'pub', '$JS.API.STREAM.MSG.DELETE.KV_acme_heartbeats')).toBe(true);
    expect(subjectAllowed(gateway, 'pub', '$KV.acme_heartbeats.m1')).toBe(false);
    expect(subjectAllowed(gateway, 'pub', '$JS.API.STREAM.PURGE.KV_acme_heartbeats')).toBe(false);
    for (const b of BUCKET_ACCESS.filter((b) => !b.erase?.includes('gateway')))
      expect([b.bucket.name, subjectAllowed(gateway, 'pub', `$JS.API.STREAM.MSG.DELETE.KV_acme_${b.bucket.name}`)]).toEqual([
        b.bucket.name,
        false,
      ]);
    for (const p of ['scheduler', 'autoscaler', 'metering', 'reputation'] as const)
      expect(subjectAllowed(permissionsFor(p, { namespace: ns }), 'pub', '$JS.API.STREAM.MSG.DELETE.KV_acme_heartbeats')).toBe(false);
    expect(subjectAllowed(machine('m1'), 'pub', '$JS.API.STREAM.MSG.DELETE.KV_acme_heartbeats')).toBe(false);
  });

  it("gives a task permit one version's consumer: its info, pulls and acks, into the machine's own inbox, nothing else", () => {
    const permit = taskPermitPermissions({ namespace: ns, machineId: 'm1', deploymentId: 'd1', version: 2 });
    for (const s of [
      '$JS.API.CONSUMER.INFO.acme_TASKS.tasks-d1-v2',
      '$JS.API.CONSUMER.MSG.NEXT.acme_TASKS.tasks-d1-v2',
      '$JS.ACK.acme_TASKS.tasks-d1-v2.1.7.7.1700000000000000000.0',
    ])
      expect([s, subjectAllowed(permit, 'pub', s)]).toEqual([s, true]);
    for (const s of [
      '$JS.API.CONSUMER.MSG.NEXT.acme_TASKS.tasks-d1-v1',
      '$JS.API.CONSUMER.MSG.NEXT.acme_TASKS.tasks-d2-v2',
      '$JS.ACK.acme_TASKS.tasks-d2-v2.1.7.7.1.0',
      '$JS.API.CONSUMER.DELETE.acme_TASKS.tasks-d1-v2',
      '$JS.API.STREAM.MSG.GET.acme_TASKS',
      '$JS.API.DIRECT.GET.acme_TASKS',
      'acme.heartbeat.m1.v1',
      'acme.beat.m1.v1',
      'acme.tasks.d1.2.v1',
    ])
      expect([s, subjectAllowed(permit, 'pub', s)]).toEqual([s, false]);
    expect(subjectAllowed(permit, 'sub', `${inboxPrefix(ns, 'agent', 'm1')}.x`)).toBe(true);
    expect(subjectAllowed(permit, 'sub', 'acme.tasks.d1.2.v1')).toBe(false);
    expect(subjectAllowed(permit, 'sub', `${inboxPrefix(ns, 'agent', 'm2')}.x`)).toBe(false);
  });

  it('tracks replies (allow_responses) for machines only; the control plane answers in the inboxes of who asks it', () => {
    expect(machine('m1').resp).toBeDefined();
    for (const p of ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'] as const) {
      const perms = permissionsFor(p, { namespace: ns });
      expect([p, perms.resp]).toEqual([p, undefined]);
      expect(subjectAllowed(perms, 'pub', `${presenceReplies(ns)}.abc123`)).toBe(true);
      expect(subjectAllowed(perms, 'pub', `${inboxPrefix(ns, 'gateway')}.abc123`)).toBe(false);
      expect(subjectAllowed(perms, 'pub', `${inboxPrefix(ns, 'scheduler')}.abc123`)).toBe(false);
      expect(subjectAllowed(perms, 'pub', `${inboxPrefix('other', 'gateway')}.presence.abc123`)).toBe(false);
      // Integrators' task submits and machines' network-test echoes are the gateway's to answer.
      const gateway = p === 'gateway';
      expect([p, subjectAllowed(perms, 'pub', `${integratorInbox(ns, 'u1')}.abc.1`)]).toEqual([p, gateway]);
      expect([p, subjectAllowed(perms, 'pub', `${inboxPrefix(ns, 'agent', 'm1')}.abc.1`)]).toEqual([p, gateway]);
      expect(subjectAllowed(perms, 'pub', `${inboxPrefix('other', 'agent', 'm1')}.abc.1`)).toBe(false);
    }
    expect(subjectAllowed(machine('m1'), 'pub', `${presenceReplies(ns)}.abc123`)).toBe(false);
  });

  it('refuses an agent user without a machine id', () => {
    expect(() => permissionsFor('agent', { namespace: ns })).toThrow(/machine id/);
  });

  describe('integratorPermissions', () => {
    const user = (scopes: ('events' | 'submit')[]) => integratorPermissions({ namespace: ns, workspaceId: 'w1', scopes, userId: 'u1' });

    it("opens the table's integrator subjects with its own workspace id, and nothing of another workspace", () => {
      const both = user(['events', 'submit']);
      for (const a of CONTRACT_ACCESS) {
        const own = wire(
          subjectFor(
            a.contract,
            ...a.contract.subject
              .split('.')
              .filter((t) => t === '*')
              .map(() => 'w1'),
          ),
        );
        const other = own.replace('.w1.', '.w2.');
        const kind = a.integrator === 'submit' ? 'pub' : 'sub';
        expect([a.contract.subject, subjectAllowed(both, kind, own)]).toEqual([a.contract.subject, Boolean(a.integrator)]);
        expect([a.contract.subject, subjectAllowed(both, 'pub', other) || subjectAllowed(both, 'sub', other)]).toEqual([
          a.contract.subject,
          false,
        ]);
      }
    });

    it('gives events only hearing and submit only the submit request, each its own inbox', () => {
      const events = user(['events']);
      expect(subjectAllowed(events, 'sub', 'acme.task.submitted.w1.v1')).toBe(true);
      expect(subjectAllowed(events, 'pub', 'acme.workspace.w1.task.submit.v1')).toBe(false);
      // NATS reads an empty allow list as "everything": publishing nothing is an explicit deny.
      expect(events.pub).toEqual({ allow: [], deny: ['>'] });
      const submit = user(['submit']);
      expect(subjectAllowed(submit, 'pub', 'acme.workspace.w1.task.submit.v1')).toBe(true);
      expect(subjectAllowed(submit, 'sub', 'acme.task.submitted.w1.v1')).toBe(false);
      expect(subjectAllowed(submit, 'sub', `${integratorInbox(ns, 'u1')}.x`)).toBe(true);
      expect(subjectAllowed(submit, 'sub', `${integratorInbox(ns, 'u2')}.x`)).toBe(false);
      for (const s of ['>', 'acme.>', '$JS.API.INFO', '$KV.acme_routes.c1', 'acme.tasks.d1.1.v1', '_INBOX.x']) {
        expect([s, subjectAllowed(submit, 'pub', s) || subjectAllowed(submit, 'sub', s)]).toEqual([s, false]);
      }
    });
  });
});
