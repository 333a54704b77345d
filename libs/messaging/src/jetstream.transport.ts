import { Logger } from '@nestjs/common';
// Imported once, not per message: an import() per message was a trip through the module loader each time.
import { defaultIfEmpty, lastValueFrom, type Observable } from 'rxjs';
import { BaseRpcContext, type CustomTransportStrategy, type MessageHandler, Server } from '@nestjs/microservices';
import { type Subscription } from '@nats-io/transport-node';
import { type Contract } from '#tern/contracts';
import { type Delivery, type RunningConsumer, startConsumer } from './consumer.js';
import { startEventSubscription } from './core-events.js';
import { type ConsumeExtras, type EventExtras, type RequestExtras, TERN_CONTRACT } from './decorators.js';
import { ReplyError } from './errors.js';
import { type Messaging } from './messaging.js';

/** The context a handler receives as its second argument (`@Ctx()`). */
export class JetStreamContext extends BaseRpcContext<[Delivery<object> | undefined, string, number?]> {
  /** A JetStream message's delivery (@OnMessage); undefined for core NATS. */
  get delivery(): Delivery<object> | undefined {
    return this.args[0];
  }
  get subject(): string {
    return this.args[1];
  }
  /** When a core NATS event (@OnEvent) arrived, epoch ms by this process's clock. */
  get receivedAt(): number | undefined {
    return this.args[2];
  }
}

async function settleHandler(handler: MessageHandler, payload: unknown, ctx: JetStreamContext): Promise<unknown> {
  const result = await handler(payload, ctx);
  // Nest wraps handler results (and errors, via its exception filter) in observables.
  if (result && typeof (result as { subscribe?: unknown }).subscribe === 'function') {
    return lastValueFrom((result as Observable<unknown>).pipe(defaultIfEmpty(undefined)));
  }
  return result;
}

/** Values for the named subject tokens of @OnRequest handlers (e.g. `{ machineId: 'm1' }` on an agent). */
export type SubjectTokens = Record<string, string | undefined>;

/**
 * A Nest transport over JetStream: @OnMessage handlers get a durable pull consumer with
 * explicit acks, @OnEvent and @OnRequest handlers a queue-group subscription on core NATS.
 */
export class JetStreamTransport extends Server implements CustomTransportStrategy {
  private readonly consumers: RunningConsumer[] = [];
  private readonly subscriptions: Subscription[] = [];
  protected override readonly logger = new Logger('jetstream');

  constructor(
    private readonly messaging: Messaging,
    private readonly serviceName: string,
    private readonly subjectTokens: SubjectTokens = {},
  ) {
    super();
  }

  async listen(callback: (...optional: unknown[]) => void) {
    try {
      for (const [pattern, handler] of this.messageHandlers) {
        const contract = handler.extras?.[TERN_CONTRACT] as Contract | undefined;
        if (!contract) throw new Error(`handler for ${pattern} was not declared with @OnMessage or @OnRequest`);
        if (handler.isEventHandler && !contract.stream) await this.bindEvents(contract, handler);
        else if (handler.isEventHandler) await this.bindConsumer(contract, handler);
        else this.bindRequest(contract, handler);
      }
      callback();
    } catch (e) {
      callback(e);
    }
  }

  private async bindConsumer(contract: Contract, handler: MessageHandler) {
    const extras = (handler.extras ?? {}) as ConsumeExtras;
    const running = await startConsumer(
      this.messaging,
      {
        stream: contract.stream!,
        durable: extras.durable ?? this.messaging.ns.durable(this.serviceName, contract.subject),
        filterSubject: contract.subject,
        payload: contract.payload,
        ackWaitMs: extras.ackWaitMs,
        maxDeliver: extras.maxDeliver,
        concurrency: extras.concurrency,
        deliver: extras.deliver,
        autoProgress: extras.autoProgress,
      },
      async (delivery) => {
        await settleHandler(handler, delivery.payload, new JetStreamContext([delivery, delivery.subject]));
      },
    );
    this.consumers.push(running);
  }

  /** One queue group per service: every replica of it joins, so each event reaches one of them. */
  private async bindEvents(contract: Contract, handler: MessageHandler) {
    const running = await startEventSubscription(
      this.messaging,
      contract,
      this.messaging.ns.service(this.serviceName),
      (payload, subject, receivedAt) => settleHandler(handler, payload, new JetStreamContext([undefined, subject, receivedAt])),
      { maxInFlight: ((handler.extras ?? {}) as EventExtras).maxInFlight },
    );
    this.consumers.push(running);
  }

  private bindRequest(contract: Contract, handler: MessageHandler) {
    const names = ((handler.extras ?? {}) as RequestExtras).tokens ?? [];
    const tokens = names.map((name) => {
      const value = this.subjectTokens[name];
      if (!value) throw new Error(`@OnRequest(${contract.subject}) needs the subject token "${name}", which this service was not given`);
      return value;
    });
    const sub = this.messaging.serve(
      contract,
      this.messaging.ns.service(this.serviceName),
      async (payload, subject) => {
        try {
          return (await settleHandler(handler, payload, new JetStreamContext([undefined, subject]))) as object;
        } catch (e) {
          // Nest's RPC exception filter turns thrown errors into plain objects; keep a ReplyError's code.
          const err = e as { code?: number; message?: string; status?: string };
          if (e instanceof ReplyError) throw e;
          if (typeof err.code === 'number') throw new ReplyError(err.code, String(err.message));
          throw e;
        }
      },
      tokens,
    );
    this.subscriptions.push(sub);
  }

  async close() {
    for (const s of this.subscriptions) s.unsubscribe();
    await Promise.allSettled(this.consumers.map((c) => c.stop()));
  }

  on(): never {
    throw new Error('JetStreamTransport does not emit transport events');
  }

  unwrap<T>(): T {
    return this.messaging as T;
  }
}
