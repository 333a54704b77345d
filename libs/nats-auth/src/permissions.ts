import {
  BUCKET_ACCESS,
  CONTRACT_ACCESS,
  type Contract,
  INTEGRATOR_DIRECTION,
  type IntegratorScope,
  type NatsPrincipal,
  STREAM_DECLARERS,
  STREAMS,
  type StreamName,
  SUBJECT_ROOT,
  subjectFor,
  TASK_PERMIT,
  taskConsumerName,
} from '#tern/contracts';

/** NATS user permissions as they go into a user JWT (`pub`, `sub`, `resp`). */
export interface NatsPermissions {
  /** An empty `allow` allows everything in NATS: a user who may publish nothing has `deny: ['>']`. */
  pub: { allow: string[]; deny?: string[] };
  sub: { allow: string[]; deny?: string[] };
  /** allow_responses: publish to the reply subject of a request received (any number within ttl). */
  resp?: { max: number; ttl: number };
}

/**
 * Each principal's inbox: request replies and JetStream deliveries come back under it, and it
 * may subscribe nothing else of the kind (no `_INBOX.>`: another principal's replies stay unseen).
 */
export function inboxPrefix(namespace: string, principal: NatsPrincipal, machineId?: string): string {
  return principal === 'agent' ? `_INBOX.${namespace}.machine.${machineId}` : `_INBOX.${namespace}.${principal}`;
}

/** Replies to requests and streamed invoke responses: unlimited messages for as long as an invoke may take. */
const RESPONSES = { max: -1, ttl: 15 * 60 * 1e9 };

/**
 * Where $SRV.PING answers go (`discover`): under the gateway's inbox, the one subject the
 * control-plane services may publish a reply to.
 */
export function presenceReplies(namespace: string): string {
  return `${inboxPrefix(namespace, 'gateway')}.presence`;
}

/**
 * Who answers requests with `allow_responses`. nats-server 2.9 records the reply subject of
 * every message it delivers to such a user (JetStream deliveries included: their reply is the
 * ack subject) for the whole ttl, and once more than 4,096 are held it scans all of them on
 * each delivery, so a service consuming a few hundred messages a second cost it a core
 * (bench/agents README, the profile). Machines keep it: they reply to the gateway's and the
 * scheduler's requests, their own deliveries are few, and an explicit grant on another
 * principal's inbox would let one forge replies to requests sent to other machines. The control
 * plane answers by explicit grants instead (answerGrants).
 */
const ANSWERS_WITH_RESPONSES: readonly NatsPrincipal[] = ['agent'];

/**
 * The inboxes a control-plane service may reply to: every service answers $SRV.PING to
 * presenceReplies; the gateway also answers integrators' task submits and machines' network-test
 * echoes, in their own inboxes (it holds the account signer, so the grant gives it nothing it
 * could not already issue itself).
 */
function answerGrants(namespace: string, principal: NatsPrincipal): string[] {
  const presence = `${presenceReplies(namespace)}.>`;
  if (principal !== 'gateway') return [presence];
  return [presence, `${integratorInbox(namespace, '*')}.>`, `${inboxPrefix(namespace, 'agent', '*')}.>`];
}

/** A contract's subject on the wire, for one principal: the machine id filled in where the table says so. */
function wireSubject(contract: Contract, namespace: string, byMachine: boolean, machineId?: string): string {
  let subject = contract.subject;
  if (byMachine && machineId) {
    const tokens = subject.split('.');
    tokens[2] = machineId;
    subject = tokens.join('.');
  }
  return namespace + subject.slice(SUBJECT_ROOT.length);
}

/** The JetStream API subjects to declare, inspect and consume one stream (no delete, no purge). */
function streamApi(stream: string, declare: boolean): string[] {
  return [
    `$JS.API.STREAM.INFO.${stream}`,
    ...(declare ? [`$JS.API.STREAM.CREATE.${stream}`, `$JS.API.STREAM.UPDATE.${stream}`] : []),
    // CREATE (ephemeral, and named with a filter), INFO and DELETE of the stream's consumers.
    `$JS.API.CONSUMER.*.${stream}`,
    `$JS.API.CONSUMER.*.${stream}.>`,
    `$JS.API.CONSUMER.DURABLE.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.>`,
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.ACK.${stream}.>`,
    `$JS.FC.${stream}.>`,
  ];
}

/** What a machine may do on a stream it declares (until agents stop declaring streams, issue 11). */
function declareApi(stream: string): string[] {
  return [`$JS.API.STREAM.INFO.${stream}`, `$JS.API.STREAM.CREATE.${stream}`, `$JS.API.STREAM.UPDATE.${stream}`];
}

export interface PermissionsOptions {
  namespace: string;
  /** For `agent`: the machine whose user this is. */
  machineId?: string;
}

/**
 * The permissions of one principal in one namespace, derived from the table in
 * libs/contracts/src/permissions.ts: the subjects of the contracts it publishes and subscribes,
 * the JetStream API of the streams those contracts live on (and of the streams it declares),
 * read or write access to the KV buckets and object stores it uses, and its own inbox.
 */
export function permissionsFor(principal: NatsPrincipal, opts: PermissionsOptions): NatsPermissions {
  const { namespace, machineId } = opts;
  if (principal === 'agent' && !machineId) throw new Error('an agent user needs its machine id');
  const pub = new Set<string>(['$JS.API.INFO']);
  const sub = new Set<string>([`${inboxPrefix(namespace, principal, machineId)}.>`]);
  const streams = new Map<StreamName, boolean>();
  for (const name of STREAM_DECLARERS[principal]) streams.set(name, true);

  for (const a of CONTRACT_ACCESS) {
    const subject = wireSubject(a.contract, namespace, Boolean(a.byMachine) && principal === 'agent', machineId);
    const publishes = a.publish.includes(principal);
    const subscribes = a.subscribe.includes(principal);
    if (publishes) pub.add(subject);
    if (subscribes) sub.add(subject);
    if ((publishes || subscribes) && a.contract.stream && !streams.has(a.contract.stream)) streams.set(a.contract.stream, false);
  }
  const streamName = (name: StreamName) => `${namespace}_${STREAMS[name].name}`;
  if (principal === 'agent') {
    for (const name of STREAM_DECLARERS.agent) for (const s of declareApi(streamName(name))) pub.add(s);
  } else {
    for (const [name, declare] of streams) for (const s of streamApi(streamName(name), declare)) pub.add(s);
  }
  // A cancelled or expired task's message is deleted from TASKS, so that it never runs
  // (TasksService.stopCancelled, TaskExpiry); one message by its sequence, never the stream.
  if (principal === 'gateway') pub.add(`$JS.API.STREAM.MSG.DELETE.${streamName('TASKS')}`);

  for (const b of BUCKET_ACCESS) {
    const writes = b.write.includes(principal);
    if (!writes && !b.read.includes(principal)) continue;
    const bucket = `${namespace}_${b.bucket.name}`;
    const stream = b.kind === 'kv' ? `KV_${bucket}` : `OBJ_${bucket}`;
    if (principal === 'agent') {
      // A machine reads one key of a KV bucket, its own machine id (a direct get names the key's
      // subject), and opens the bucket as it is: no consumer on it, no other machine's entry.
      if (b.kind !== 'kv' || writes) throw new Error(`machines may only read KV buckets, not use ${b.bucket.name}`);
      pub.add(`$JS.API.STREAM.INFO.${stream}`);
      pub.add(`$JS.API.DIRECT.GET.${stream}.$KV.${bucket}.${machineId}`);
      continue;
    }
    // Opening a bucket creates it when missing (Messaging.kv / objectStore), hence CREATE for all its users.
    for (const s of streamApi(stream, false)) pub.add(s);
    pub.add(`$JS.API.STREAM.CREATE.${stream}`);
    if (b.erase?.includes(principal)) pub.add(`$JS.API.STREAM.MSG.DELETE.${stream}`);
    if (writes) {
      pub.add(b.kind === 'kv' ? `$KV.${bucket}.>` : `$O.${bucket}.>`);
      // An object put or delete purges the object's old chunks.
      if (b.kind === 'object') pub.add(`$JS.API.STREAM.PURGE.${stream}`);
    }
  }

  // Service discovery: every process answers $SRV.PING/INFO/STATS, to all or to its own name
  // (`<namespace>-<service>`: presence.service.ts); the gateway asks (GET /health/ready).
  const name = `${namespace}-${principal}`;
  for (const verb of ['PING', 'INFO', 'STATS']) {
    sub.add(`$SRV.${verb}`);
    sub.add(`$SRV.${verb}.${name}`);
    sub.add(`$SRV.${verb}.${name}.*`);
  }
  if (principal === 'gateway') pub.add('$SRV.>');
  if (ANSWERS_WITH_RESPONSES.includes(principal)) return { pub: { allow: [...pub] }, sub: { allow: [...sub] }, resp: RESPONSES };
  for (const s of answerGrants(namespace, principal)) pub.add(s);
  return { pub: { allow: [...pub] }, sub: { allow: [...sub] } };
}

export interface IntegratorUserOptions {
  namespace: string;
  workspaceId: string;
  scopes: readonly IntegratorScope[];
  /** The user's id (its record at the gateway): its inbox is its own. */
  userId: string;
}

/** An integrator user's inbox: its client connects with `inboxPrefix` set to it. */
export function integratorInbox(namespace: string, userId: string): string {
  return `_INBOX.${namespace}.integrator.${userId}`;
}

/**
 * The permissions of an integrator's user (`tern nats user create`): the subjects the table
 * opens to integrators for the scopes it was given, with its workspace's id in their token, and
 * its own inbox. No JetStream API, no buckets, no other workspace: nothing else.
 */
export function integratorPermissions(opts: IntegratorUserOptions): NatsPermissions {
  const pub: string[] = [];
  const sub = [`${integratorInbox(opts.namespace, opts.userId)}.>`];
  for (const a of CONTRACT_ACCESS) {
    if (!a.integrator || !opts.scopes.includes(a.integrator)) continue;
    const subject = opts.namespace + subjectFor(a.contract, opts.workspaceId).slice(SUBJECT_ROOT.length);
    (INTEGRATOR_DIRECTION[a.integrator] === 'publish' ? pub : sub).push(subject);
  }
  return { pub: pub.length ? { allow: pub } : { allow: [], deny: ['>'] }, sub: { allow: sub } };
}

/**
 * A machine's task permit for one task-queue version placed on it (TASK_PERMIT): the info of that
 * version's durable consumer, pulls from it and acks (also progress and naks) of its deliveries,
 * which arrive in the machine's own inbox. Nothing else: no other consumer, no stream or message
 * read, no publish of any subject.
 */
export function taskPermitPermissions(opts: {
  namespace: string;
  machineId: string;
  deploymentId: string;
  version: number;
}): NatsPermissions {
  const stream = `${opts.namespace}_${STREAMS[TASK_PERMIT.stream!].name}`;
  const consumer = taskConsumerName(opts.deploymentId, opts.version);
  return {
    pub: {
      allow: [
        `$JS.API.CONSUMER.INFO.${stream}.${consumer}`,
        `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`,
        `$JS.ACK.${stream}.${consumer}.>`,
      ],
    },
    sub: { allow: [`${inboxPrefix(opts.namespace, 'agent', opts.machineId)}.>`] },
  };
}

/** Whether the permissions let a concrete subject through (`pub` or `sub`). */
export function subjectAllowed(perms: NatsPermissions, kind: 'pub' | 'sub', subject: string): boolean {
  if (perms[kind].deny?.some((pattern) => matches(pattern, subject))) return false;
  return perms[kind].allow.some((pattern) => matches(pattern, subject));
}

/** NATS subject matching: `*` one token, `>` the rest. */
export function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}
