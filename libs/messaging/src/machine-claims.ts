import { type Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { findContract, machineIdMismatch } from '#tern/contracts';

const refused = new Counter({
  name: 'tern_messages_machine_mismatch_total',
  help: 'Messages dropped because their payload names another machine than their subject (the machine NATS let publish them), by contract subject.',
  labelNames: ['subject'],
});

/**
 * Why a received message must not be believed: a machine's fact whose payload names another
 * machine than its subject. Logged and counted here; the caller drops the message. Undefined
 * when it may be handled.
 */
export function refuseForeignMachine(canonicalSubject: string, payload: object, logger: Logger): string | undefined {
  const contract = findContract(canonicalSubject);
  const mismatch = contract && machineIdMismatch(contract, canonicalSubject, payload);
  if (!mismatch) return undefined;
  refused.inc({ subject: contract.subject });
  logger.warn({ subject: canonicalSubject, reason: mismatch }, `dropped a message naming another machine: ${mismatch}`);
  return mismatch;
}
