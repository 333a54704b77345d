import { Logger } from '@nestjs/common';
import { createInbox, type Msg, type Subscription } from '@nats-io/transport-node';
import { fireAndForget, Ticker } from '#tern/timing';
import type { Messaging } from '../messaging.js';

/** How often overdue requests are looked for: an idle timeout fires at most this much late. */
const SWEEP_MS = 250;

/** One request waiting for its response messages. */
export interface PendingReply {
  /** Each message to this request's reply subject, in arrival order. */
  onMessage(msg: Msg): void;
  /** Nothing arrived for longer than the request's idle timeout. */
  onIdle(): void;
  readonly idleMs: number;
  /** When the last message arrived (or the request was sent), performance.now(). */
  lastHeard: number;
}

/**
 * The reply inbox of one connection's invokes: a single wildcard subscription
 * `<inboxPrefix>.<nuid>.*` whose last token names the request, and a single sweep for requests
 * gone silent. A request then costs one PUB on the wire (no SUB/UNSUB pair) and no timer of
 * its own.
 */
export class ReplyInbox {
  private static readonly byMessaging = new WeakMap<Messaging, ReplyInbox>();
  private readonly logger = new Logger('invoke');
  private readonly pending = new Map<string, PendingReply>();
  private readonly prefix: string;
  private sub?: Subscription;
  private next = 0;
  private checking = false;
  private readonly idleCheck = new Ticker({ name: 'invoke idle sweep', everyMs: SWEEP_MS, logger: this.logger, unref: true }, () =>
    this.sweep(),
  );

  /** The inbox of `messaging`'s connection, subscribed on first use. */
  static of(messaging: Messaging): ReplyInbox {
    let inbox = ReplyInbox.byMessaging.get(messaging);
    if (!inbox) {
      inbox = new ReplyInbox(messaging);
      ReplyInbox.byMessaging.set(messaging, inbox);
    }
    return inbox;
  }

  private constructor(private readonly messaging: Messaging) {
    // Under the connection's own inbox prefix: its NATS user may subscribe to no other inbox.
    this.prefix = `${createInbox(messaging.inboxPrefix)}.`;
  }

  /** Registers a request; returns the reply subject to send it with. */
  add(reply: PendingReply): string {
    this.subscribe();
    const token = (this.next++).toString(36);
    this.pending.set(token, reply);
    if (!this.checking) {
      this.checking = true;
      this.idleCheck.start();
    }
    return this.prefix + token;
  }

  /** Forgets a request (ended, failed or abandoned): later messages to its subject are dropped. */
  remove(subject: string): void {
    this.pending.delete(subject.slice(this.prefix.length));
  }

  private subscribe(): void {
    if (this.sub && !this.sub.isClosed()) return;
    this.sub = this.messaging.nc.subscribe(`${this.prefix}*`, {
      callback: (err, msg) => {
        if (err) return this.logger.warn(`reply inbox ${this.prefix}* failed: ${err.message}`);
        const reply = this.pending.get(msg.subject.slice(this.prefix.length));
        if (!reply) return;
        reply.lastHeard = performance.now();
        reply.onMessage(msg);
      },
    });
  }

  private sweep(): void {
    if (!this.pending.size) {
      this.checking = false;
      fireAndForget('stopping the idle sweep', this.logger, this.idleCheck.stop());
      return;
    }
    const now = performance.now();
    for (const reply of this.pending.values()) if (now - reply.lastHeard > reply.idleMs) reply.onIdle();
  }
}
