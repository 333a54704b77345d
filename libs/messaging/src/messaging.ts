import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { headers as natsHeaders, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  jetstream,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  jetstreamManager,
  type PubAck,
  RetentionPolicy,
  StorageType,
  JetStreamApiCodes,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { type ObjectStore, Objm } from '@nats-io/obj';
import { type Contract, STREAMS, type StreamName, type StreamSpec, subjectFor, subjectTokensOf } from '#tern/contracts';
import { decode, encode } from './codec.js';
import { ERROR_CODE_HEADER, ERROR_HEADER, ReplyError, RequestError } from './errors.js';
import { refuseForeignMachine } from './machine-claims.js';
import { Hearing } from './hearing.js';
import { type Namespace } from './namespace.js';
import { fireAndForget } from '#tern/timing';

const SECOND_NS = 1_000_000_000;

/**
 * Names the process that emitted a core NATS notice (`emit` with `markOrigin`), so that its own
 * subscription can drop the echo before decoding it (`listen` with `othersOnly`): a process that
 * handles its notices in-process need not read each one back and validate it again.
 */
export const ORIGIN_HEADER = 'Tern-Origin';

export interface PublishOptions {
  /** Nats-Msg-Id: a repeat within the stream's duplicate window is stored once. */
  msgId?: string;
  /** Values for the `*` tokens of the contract's subject (after the machine id a contract with `machineIdField` takes from the payload). */
  tokens?: string[];
  headers?: Record<string, string>;
  /** How long to wait for the server's ack (default: the client's, 5 s). */
  timeoutMs?: number;
}

export interface ConsumerSpec {
  stream: StreamName;
  durable: string;
  filterSubject: string;
  ackWaitMs?: number;
  maxDeliver?: number;
  maxAckPending?: number;
  /** 'all' replays what the stream holds when the consumer is first created; 'new' starts now. */
  deliver?: 'all' | 'new';
}

export interface KvSpec {
  name: string;
  /** Bucket-wide TTL (NATS 2.9 has no per-key TTL). */
  ttlMs?: number;
  history?: number;
  /** Object stores: shown by `nats object info`, set when the store is created. */
  description?: string;
}

/**
 * JetStream and core NATS behind the contracts: names are rewritten into the namespace,
 * payloads are JSON validated by the contract's class on the way in.
 */
export class Messaging {
  readonly js: JetStreamClient;
  private jsmPromise?: Promise<JetStreamManager>;
  private readonly kvm: Kvm;
  private readonly buckets = new Map<string, Promise<KV>>();
  private readonly objectStores = new Map<string, Promise<ObjectStore>>();
  private readonly logger = new Logger('messaging');
  /** This instance's name in ORIGIN_HEADER: random, so no other process's notices match it. */
  readonly origin = randomUUID();
  private readonly hearings = new Map<string, Hearing>();

  /**
   * @param declares false for a machine's agent: it creates no stream, consumer, bucket or
   * object store (the control plane does), and opens the stores it uses as they are.
   */
  constructor(
    readonly nc: NatsConnection,
    readonly ns: Namespace,
    /** The connection's inbox prefix (its NATS user may subscribe no other inbox). */
    readonly inboxPrefix = '_INBOX',
    readonly declares = true,
    /** Copies of every stream, bucket and store this process declares (NATS_REPLICAS): 3 in a cluster. */
    readonly replicas = 1,
  ) {
    this.js = jetstream(nc);
    this.kvm = new Kvm(nc);
  }

  jsm(): Promise<JetStreamManager> {
    this.jsmPromise ??= jetstreamManager(this.nc).catch((e) => {
      this.jsmPromise = undefined;
      throw e;
    });
    return this.jsmPromise;
  }

  /**
   * When this process could hear a core event contract it subscribes in a queue group
   * (`startEventSubscription`, `@OnEvent`): its handlers ask, to tell the senders' silence from
   * their own. One per contract, made on first ask.
   */
  hearing(contract: Contract): Hearing {
    let h = this.hearings.get(contract.subject);
    if (!h) this.hearings.set(contract.subject, (h = new Hearing()));
    return h;
  }

  /** The wire subject for a contract, `*` tokens filled. */
  subject(contract: Contract, tokens: string[] = []): string {
    return this.ns.subject(tokens.length ? subjectFor(contract, ...tokens) : contract.subject);
  }

  /** Publishes a fact or command to its JetStream stream; resolves once the server stored it. */
  async publish<T extends object>(contract: Contract<T>, payload: T, opts: PublishOptions = {}): Promise<PubAck> {
    if (!contract.stream) throw new Error(`${contract.subject} is not on a stream; use emit() or request()`);
    const h = this.headers(opts.headers);
    return this.js.publish(this.subject(contract, subjectTokensOf(contract, payload, opts.tokens)), encode(payload), {
      msgID: opts.msgId,
      headers: h,
      ...(opts.timeoutMs ? { timeout: opts.timeoutMs } : {}),
    });
  }

  /**
   * Core NATS publish: fire and forget (logs, presence). Tokens as for publish(). With
   * `markOrigin`, the notice names this instance (ORIGIN_HEADER) for `listen`'s `othersOnly`.
   */
  emit<T extends object>(contract: Contract<T>, payload: T, tokens: string[] = [], opts: { markOrigin?: boolean } = {}): void {
    let headers: MsgHdrs | undefined;
    if (opts.markOrigin) (headers = natsHeaders()).set(ORIGIN_HEADER, this.origin);
    this.nc.publish(this.subject(contract, subjectTokensOf(contract, payload, tokens)), encode(payload), headers ? { headers } : undefined);
  }

  /**
   * Hears every message of a contract on core NATS (no queue group: every subscriber, every
   * replica, gets each one), validated; an invalid one, or one naming another machine than its
   * subject, is logged and dropped. With tokens,
   * only the concrete subject (an agent hears its own machine's); without, the contract's pattern. For notices where
   * a lost one costs little: load reports, cancels, ends, submissions counted. With `othersOnly`,
   * the notices this instance emitted with `markOrigin` are dropped unread (its caller has
   * handled them in-process).
   */
  listen<T extends object>(
    contract: Contract<T>,
    handler: (payload: T) => void,
    tokens: string[] = [],
    opts: { othersOnly?: boolean } = {},
  ): Subscription {
    const subject = this.subject(contract, tokens);
    return this.nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err) {
          this.logger.error(`subscription ${subject} failed: ${err.message}`);
          return;
        }
        if (opts.othersOnly && msg.headers?.get(ORIGIN_HEADER) === this.origin) return;
        const handled = decode(contract.payload, msg.data).then((d) => {
          if (d.ok) {
            if (!refuseForeignMachine(this.ns.canonical(msg.subject), d.value, this.logger)) handler(d.value);
          } else this.logger.warn({ subject: msg.subject, reason: d.reason }, `ignored an invalid message on ${msg.subject}`);
        });
        fireAndForget(`handling a message on ${msg.subject}`, this.logger, handled);
      },
    });
  }

  /** Core NATS request with a validated reply. Errors come back as RequestError with an HTTP-like code. */
  async request<T extends object, R extends object>(
    contract: Contract<T, R>,
    payload: T,
    opts: { tokens?: string[]; timeoutMs?: number } = {},
  ): Promise<R> {
    const subject = this.subject(contract, opts.tokens);
    let msg;
    try {
      msg = await this.nc.request(subject, encode(payload), { timeout: opts.timeoutMs ?? 5000 });
    } catch (e) {
      const text = (e as Error).message ?? String(e);
      const code = /no responders|503/i.test(text) ? 503 : /timeout/i.test(text) ? 504 : 500;
      throw new RequestError(code, `${contract.subject}: ${text}`, subject);
    }
    const error = msg.headers?.get(ERROR_HEADER);
    if (error) throw new RequestError(Number(msg.headers?.get(ERROR_CODE_HEADER) || 500), error, subject);
    if (!contract.reply) return {} as R;
    const decoded = await decode(contract.reply, msg.data);
    if (!decoded.ok) throw new RequestError(502, `invalid reply on ${contract.subject}: ${decoded.reason}`, subject);
    return decoded.value;
  }

  /**
   * Answers requests on a contract's subject within a queue group (one replica answers).
   * A payload that fails validation gets a 400 with the reason; the handler never sees it.
   * With tokens, only the concrete subject is served (an agent answers for its own machine
   * id, not for `tern.agent.*.…`); without, the contract's pattern with its wildcards.
   */
  serve<T extends object, R extends object>(
    contract: Contract<T, R>,
    queue: string,
    handler: (payload: T, subject: string) => Promise<R> | R,
    tokens: string[] = [],
  ): Subscription {
    const subject = this.subject(contract, tokens);
    return this.nc.subscribe(subject, {
      queue,
      callback: (err, msg) => {
        if (err) {
          this.logger.error(`subscription ${subject} failed: ${err.message}`);
          return;
        }
        const answered = (async () => {
          const fail = (code: number, message: string) => {
            const h = natsHeaders();
            h.set(ERROR_HEADER, message.replace(/[\r\n]+/g, ' '));
            h.set(ERROR_CODE_HEADER, String(code));
            msg.respond(new Uint8Array(), { headers: h });
          };
          const decoded = await decode(contract.payload, msg.data);
          if (!decoded.ok) {
            this.logger.warn(`rejected request on ${msg.subject}: ${decoded.reason}`);
            return fail(400, decoded.reason);
          }
          try {
            const reply = await handler(decoded.value, this.ns.canonical(msg.subject));
            msg.respond(encode(reply ?? {}));
          } catch (e) {
            if (e instanceof ReplyError) return fail(e.code, e.message);
            this.logger.error(`handler for ${msg.subject} failed: ${(e as Error).stack ?? e}`);
            fail(500, 'internal error');
          }
        })();
        fireAndForget(`answering a request on ${msg.subject}`, this.logger, answered);
      },
    });
  }

  /** Creates or updates a stream to match its spec. Safe when several services start at once. */
  async ensureStream(spec: StreamSpec): Promise<void> {
    this.mayDeclare(`stream ${spec.name}`);
    const jsm = await this.jsm();
    const config = {
      name: this.ns.stream(spec.name),
      subjects: spec.subjects.map((s) => this.ns.subject(s)),
      retention: spec.retention === 'workqueue' ? RetentionPolicy.Workqueue : RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      max_age: spec.maxAgeSeconds * SECOND_NS,
      duplicate_window: spec.duplicateWindowSeconds * SECOND_NS,
      num_replicas: this.replicas,
    };
    try {
      await jsm.streams.add(config);
    } catch (e) {
      if (!(e instanceof JetStreamApiError)) throw e;
      // Already there with other settings (an older version declared it): bring it up to date.
      await jsm.streams.update(config.name, config).catch((u: Error) => {
        throw this.tooManyReplicas(spec.name, e) ?? this.tooManyReplicas(spec.name, u) ?? u;
      });
    }
  }

  /** A server that cannot keep NATS_REPLICAS copies: an error that says what to set instead. */
  private tooManyReplicas(stream: string, e: Error): Error | undefined {
    if (this.replicas <= 1 || !/replica|cluster|insufficient/i.test(e.message)) return undefined;
    return new Error(
      `stream ${stream}: NATS cannot keep ${this.replicas} copies (${e.message}): NATS_REPLICAS=${this.replicas} needs a JetStream cluster of at least ${this.replicas} servers; use 1 on a single server`,
      { cause: e },
    );
  }

  async ensureStreams(names: StreamName[]): Promise<void> {
    for (const name of names) await this.ensureStream(STREAMS[name]);
  }

  /** Creates or updates a durable pull consumer. */
  async ensureConsumer(spec: ConsumerSpec): Promise<void> {
    this.mayDeclare(`consumer ${spec.durable}`);
    const jsm = await this.jsm();
    const stream = this.ns.stream(spec.stream);
    const config = {
      durable_name: spec.durable,
      filter_subject: this.ns.subject(spec.filterSubject),
      ack_policy: AckPolicy.Explicit,
      ack_wait: (spec.ackWaitMs ?? 30_000) * 1_000_000,
      max_deliver: spec.maxDeliver ?? -1,
      max_ack_pending: spec.maxAckPending ?? 1000,
      deliver_policy: spec.deliver === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
    };
    try {
      await jsm.consumers.add(stream, config);
    } catch (e) {
      if (!(e instanceof JetStreamApiError) || e.code === JetStreamApiCodes.StreamNotFound) throw e;
      // Exists with other settings: update what may change (the start position may not).
      const { deliver_policy: _fixed, ...updatable } = config;
      await jsm.consumers.update(stream, spec.durable, updatable);
    }
  }

  /**
   * Opens (creating when missing, unless this process declares nothing) a KV bucket in this namespace, once per process: later
   * calls share the first open; a failed open is retried on the next call.
   */
  kv(spec: KvSpec): Promise<KV> {
    return this.openOnce(this.buckets, spec.name, (name) =>
      this.declares
        ? this.kvm.create(name, { ttl: spec.ttlMs ?? 0, history: spec.history ?? 1, replicas: this.replicas })
        : this.kvm.open(name),
    );
  }

  /** Opens (creating when missing, unless this process declares nothing) an object store in this namespace, once per process, like kv(). */
  objectStore(spec: KvSpec): Promise<ObjectStore> {
    return this.openOnce(this.objectStores, spec.name, (name) =>
      this.declares
        ? new Objm(this.nc).create(name, {
            ttl: (spec.ttlMs ?? 0) * 1_000_000,
            replicas: this.replicas,
            ...(spec.description ? { description: spec.description } : {}),
          })
        : new Objm(this.nc).open(name),
    );
  }

  private mayDeclare(what: string): void {
    if (!this.declares) throw new Error(`this process declares nothing on NATS (the control plane does): not the ${what}`);
  }

  private openOnce<T>(cache: Map<string, Promise<T>>, bucket: string, open: (name: string) => Promise<T>): Promise<T> {
    const name = this.ns.bucket(bucket);
    let opened = cache.get(name);
    if (!opened) {
      opened = open(name);
      opened.catch(() => cache.delete(name));
      cache.set(name, opened);
    }
    return opened;
  }

  private headers(values?: Record<string, string>): MsgHdrs | undefined {
    if (!values) return undefined;
    const h = natsHeaders();
    for (const [k, v] of Object.entries(values)) h.set(k, v);
    return h;
  }
}
