import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { type Contract } from '#tern/contracts';

export interface ConsumeExtras {
  /** Durable consumer name; defaults to `<service>_<subject tokens>`. Distinct names each get every message. */
  durable?: string;
  ackWaitMs?: number;
  maxDeliver?: number;
  concurrency?: number;
  deliver?: 'all' | 'new';
  autoProgress?: boolean;
}

export const TERN_CONTRACT = 'ternContract';

/**
 * Handles messages of a JetStream contract through a durable pull consumer. The handler gets
 * the validated payload and a Delivery (working, retryLater, reject); returning acks, throwing
 * naks with back-off, an invalid payload is terminated before the handler runs.
 */
export function OnMessage(contract: Contract, extras: ConsumeExtras = {}): MethodDecorator {
  if (!contract.stream) throw new Error(`@OnMessage(${contract.subject}): not a JetStream contract, use @OnRequest`);
  return EventPattern(contract.subject, { ...extras, [TERN_CONTRACT]: contract }) as MethodDecorator;
}

export interface EventExtras {
  /**
   * Messages handled at once. A core subscription cannot hold NATS back, so past this a message
   * is dropped (logged, counted) rather than queued without bound: size it well above a batch.
   */
  maxInFlight?: number;
}

/**
 * Handles a core NATS event contract (no stream) in a queue group of this service: each message
 * reaches one replica of the service, none is stored or acknowledged, and one sent while no
 * replica listens is lost. The handler gets the validated payload; its context says when the
 * message arrived (`receivedAt`). For high-rate facts that the next one supersedes (heartbeats).
 */
export function OnEvent(contract: Contract, extras: EventExtras = {}): MethodDecorator {
  if (contract.stream || contract.kind !== 'event') throw new Error(`@OnEvent(${contract.subject}): not a core NATS event, use @OnMessage`);
  return EventPattern(contract.subject, { ...extras, [TERN_CONTRACT]: contract }) as MethodDecorator;
}

export interface RequestExtras {
  /**
   * Names of the values that fill the subject's `*` tokens, in order, looked up in the
   * transport's `subjectTokens` when it starts (e.g. `['machineId']`: an agent serves
   * `tern.agent.<its id>.container.start.v1` only). Without, the wildcard pattern is served.
   */
  tokens?: string[];
}

/** Answers core NATS requests of a contract (one replica of the service per request). */
export function OnRequest(contract: Contract, extras: RequestExtras = {}): MethodDecorator {
  if (contract.stream) throw new Error(`@OnRequest(${contract.subject}): a JetStream contract, use @OnMessage`);
  return MessagePattern(contract.subject, { ...extras, [TERN_CONTRACT]: contract }) as MethodDecorator;
}
