import { Logger } from '@nestjs/common';
import { type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import { Counter } from 'prom-client';
import { type Class } from '#tern/contracts';
import { decode } from './codec.js';
import { refuseForeignMachine } from './machine-claims.js';
import { type ConsumerSpec, type Messaging } from './messaging.js';
import { backoffMs } from '#tern/timing';

/** What a handler may do with the message it is given, beyond returning (ack) or throwing (nak with back-off). */
export interface Delivery<T> {
  readonly payload: T;
  /** The subject in contract form (root `tern`), e.g. `tern.heartbeat.m1.v1`. */
  readonly subject: string;
  /** 1 on first delivery. */
  readonly deliveryCount: number;
  /** When the NATS server stored the message: the control plane's own clock, not the publisher's word. */
  readonly storedAt: Date;
  readonly headers: Record<string, string>;
  /** Tells the server the handler is still at it, restarting the ack wait. */
  working(): void;
  /** Redeliver after delayMs instead of the default back-off. */
  retryLater(delayMs: number): void;
  /** Never redeliver; the reason is logged. */
  reject(reason: string): void;
}

export type DeliveryOutcome = { kind: 'ack' } | { kind: 'nak'; delayMs: number } | { kind: 'term'; reason: string };

export interface ConsumeOptions<T> extends ConsumerSpec {
  payload: Class<T>;
  /** Messages handled at once. */
  concurrency?: number;
  /** Call working() on a timer while a handler runs, so slow handlers are not redelivered. Default true. */
  autoProgress?: boolean;
}

const settled = new Counter({
  name: 'tern_messages_settled_total',
  help: 'JetStream messages settled by this process, by contract subject and outcome (ack, nak, term).',
  labelNames: ['subject', 'outcome'],
});

/** Back-off after a handler error: 1 s, 2 s, 4 s ... capped at 60 s (the first delivery counts as one). */
export function retryDelayMs(deliveryCount: number): number {
  return backoffMs(Math.max(1, deliveryCount));
}

/**
 * Runs one message through validation and the handler and settles it: ack on success, term for
 * an invalid payload, a payload naming another machine than its subject, or an explicit reject;
 * nak with delay otherwise. Never throws.
 */
export async function settle<T extends object>(
  msg: JsMsg,
  payloadClass: Class<T>,
  canonicalSubject: string,
  handler: (d: Delivery<T>) => Promise<unknown>,
  logger: Logger,
  progressEveryMs?: number,
): Promise<DeliveryOutcome> {
  const decoded = await decode(payloadClass, msg.data);
  if (!decoded.ok) {
    const reason = `invalid payload on ${canonicalSubject}: ${decoded.reason}`;
    logger.warn({ subject: canonicalSubject, seq: msg.seq, reason: decoded.reason }, `terminated message: ${reason}`);
    // No reason on the wire: NATS 2.9 only understands a bare +TERM and would leave the message pending.
    msg.term();
    settled.inc({ subject: payloadClass.name, outcome: 'term' });
    return { kind: 'term', reason };
  }
  const foreign = refuseForeignMachine(canonicalSubject, decoded.value, logger);
  if (foreign) {
    msg.term();
    settled.inc({ subject: payloadClass.name, outcome: 'term' });
    return { kind: 'term', reason: foreign };
  }
  let decision: DeliveryOutcome | undefined;
  const headers: Record<string, string> = {};
  for (const [k, v] of msg.headers ?? []) headers[k] = v.join(',');
  const delivery: Delivery<T> = {
    payload: decoded.value,
    subject: canonicalSubject,
    deliveryCount: msg.info.deliveryCount,
    storedAt: new Date(Number(msg.timestampNanos / 1_000_000n)),
    headers,
    working: () => msg.working(),
    retryLater: (delayMs) => (decision = { kind: 'nak', delayMs }),
    reject: (reason) => (decision = { kind: 'term', reason }),
  };
  const timer = progressEveryMs ? setInterval(() => msg.working(), progressEveryMs) : undefined;
  try {
    await handler(delivery);
    decision ??= { kind: 'ack' };
  } catch (e) {
    const delayMs = retryDelayMs(msg.info.deliveryCount);
    logger.error(
      { subject: canonicalSubject, seq: msg.seq, deliveryCount: msg.info.deliveryCount, err: (e as Error).message },
      `handler failed; redelivering in ${delayMs} ms`,
    );
    decision ??= { kind: 'nak', delayMs };
  } finally {
    if (timer) clearInterval(timer);
  }
  settled.inc({ subject: payloadClass.name, outcome: decision.kind });
  if (decision.kind === 'ack') msg.ack();
  else if (decision.kind === 'nak') msg.nak(decision.delayMs);
  else {
    logger.warn({ subject: canonicalSubject, seq: msg.seq, reason: decision.reason }, 'handler rejected message');
    msg.term();
  }
  return decision;
}

/**
 * How long one pull stays open. The client notices a pull lost with a server (a consumer whose
 * leader moved after a kill -9) only after two missed idle heartbeats at half this, so it bounds
 * how long a consumer stalls through a NATS server's death: 5 s here, 30 s at the client's default.
 */
export const PULL_EXPIRES_MS = 5000;

export interface RunningConsumer {
  stop(): Promise<void>;
}

/**
 * A pull-consumer loop: declares the durable consumer, then handles messages with bounded
 * concurrency until stopped. The client re-issues pulls across reconnects by itself.
 */
export async function startConsumer<T extends object>(
  messaging: Messaging,
  opts: ConsumeOptions<T>,
  handler: (d: Delivery<T>) => Promise<unknown>,
  logger = new Logger(`consumer:${opts.durable}`),
): Promise<RunningConsumer> {
  await messaging.ensureConsumer(opts);
  const consumer = await messaging.js.consumers.get(messaging.ns.stream(opts.stream), opts.durable);
  const concurrency = Math.max(1, opts.concurrency ?? 16);
  const ackWaitMs = opts.ackWaitMs ?? 30_000;
  const progressEveryMs = opts.autoProgress === false ? undefined : Math.max(500, Math.floor(ackWaitMs / 3));
  let messages: ConsumerMessages | undefined;
  let stopped = false;
  const inFlight = new Set<Promise<unknown>>();

  const loop = (async () => {
    while (!stopped) {
      try {
        messages = await consumer.consume({ max_messages: concurrency, expires: PULL_EXPIRES_MS });
        for await (const msg of messages) {
          const p = settle(msg, opts.payload, messaging.ns.canonical(msg.subject), handler, logger, progressEveryMs).finally(() =>
            inFlight.delete(p),
          );
          inFlight.add(p);
          if (inFlight.size >= concurrency) await Promise.race(inFlight);
        }
      } catch (e) {
        if (stopped) break;
        logger.warn(`consumer ${opts.durable} interrupted (${(e as Error).message}); resuming in 1 s`);
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  })();

  return {
    async stop() {
      stopped = true;
      await messages?.close();
      await loop;
      await Promise.allSettled(inFlight);
    },
  };
}
