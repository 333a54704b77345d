import { Logger } from '@nestjs/common';
import { type Subscription } from '@nats-io/transport-node';
import { Counter } from 'prom-client';
import { type Contract } from '#tern/contracts';
import { fireAndForget } from '#tern/timing';
import { decode } from './codec.js';
import { type Hearing } from './hearing.js';
import { refuseForeignMachine } from './machine-claims.js';
import { type Messaging } from './messaging.js';

const handled = new Counter({
  name: 'tern_events_handled_total',
  help: 'Core NATS events heard in a queue group (heartbeats), by contract subject and outcome (ok, invalid, foreign, failed, dropped: over the handler limit).',
  labelNames: ['subject', 'outcome'],
});

export interface EventSubscriptionOptions {
  /** Handlers running at once; a message past this is dropped and counted (default 10,000). */
  maxInFlight?: number;
  logger?: Logger;
}

export interface RunningEventSubscription {
  readonly hearing: Hearing;
  stop(): Promise<void>;
}

/**
 * Subscribes a core NATS event contract in a queue group: each message goes to one member of
 * the group. Every message is validated and checked to name the machine of its subject before
 * the handler sees it (an invalid or foreign one is logged, counted and dropped); a handler
 * error is logged and counted, never retried (nothing is stored to retry from). The handler is
 * given the message's arrival time, by this process's clock.
 */
export async function startEventSubscription<T extends object>(
  messaging: Messaging,
  contract: Contract<T>,
  queue: string,
  handler: (payload: T, subject: string, receivedAt: number) => Promise<unknown>,
  opts: EventSubscriptionOptions = {},
): Promise<RunningEventSubscription> {
  const logger = opts.logger ?? new Logger(`events:${contract.subject}`);
  const maxInFlight = Math.max(1, opts.maxInFlight ?? 10_000);
  const hearing = messaging.hearing(contract);
  const inFlight = new Set<Promise<unknown>>();
  let droppedSinceWarning = 0;
  const count = (outcome: string) => handled.inc({ subject: contract.subject, outcome });

  const sub: Subscription = messaging.nc.subscribe(messaging.subject(contract), {
    queue,
    callback: (err, msg) => {
      if (err) {
        logger.error(`subscription ${contract.subject} failed: ${err.message}`);
        return;
      }
      const receivedAt = Date.now();
      if (inFlight.size >= maxInFlight) {
        count('dropped');
        if (droppedSinceWarning++ === 0) logger.warn(`${maxInFlight} ${contract.subject} messages in hand: dropping until one settles`);
        return;
      }
      droppedSinceWarning = 0;
      const subject = messaging.ns.canonical(msg.subject);
      const p = (async () => {
        const d = await decode(contract.payload, msg.data);
        if (!d.ok) {
          count('invalid');
          logger.warn({ subject, reason: d.reason }, `ignored an invalid message on ${subject}`);
          return;
        }
        if (refuseForeignMachine(subject, d.value, logger)) return count('foreign');
        try {
          await handler(d.value, subject, receivedAt);
          count('ok');
        } catch (e) {
          count('failed');
          logger.error({ subject, err: (e as Error).message }, `handler for ${subject} failed; the message is dropped`);
        }
      })().finally(() => inFlight.delete(p));
      inFlight.add(p);
    },
  });
  // Live once the server has the subscription: what is sent from then on is heard.
  await messaging.nc.flush();
  hearing.began(Date.now());
  fireAndForget(`watching ${contract.subject}'s connection`, logger, watchConnection(messaging, hearing));
  return {
    hearing,
    async stop() {
      sub.unsubscribe();
      await Promise.allSettled(inFlight);
    },
  };
}

async function watchConnection(messaging: Messaging, hearing: Hearing) {
  for await (const s of messaging.nc.status()) {
    if (s.type === 'disconnect') hearing.lost(Date.now());
    // The client resubscribes before it reports the reconnect.
    else if (s.type === 'reconnect') hearing.regained(Date.now());
  }
}
