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
