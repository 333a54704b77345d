import { IsBoolean, IsIn, IsString } from 'class-validator';
import { defineContract } from '../contract.js';
import { ContainerEvent } from '../container/container-event.js';

/**
 * What the control plane saw go wrong on a machine, by its own observation alone:
 * - `start-unanswered`: the machine's agent did not answer a start command (no agent listening,
 *   or no reply within the command's timeout);
 * - `start-not-ready`: a container the machine accepted was not ready within the scheduler's
 *   start limit (CONTAINER_START_LIMIT_SECONDS from its placement);
 * - `container-lost`: the machine went offline (or was removed) under one of its containers.
 */
export const MACHINE_FAULT_KINDS = ['start-unanswered', 'start-not-ready', 'container-lost'] as const;
export type MachineFaultKind = (typeof MACHINE_FAULT_KINDS)[number];

/** The container's ids, the machine, and `at`: when the scheduler recorded the fault (its database's clock). */
export class MachineFault extends ContainerEvent {
  @IsIn(MACHINE_FAULT_KINDS) kind!: MachineFaultKind;
  /** Whether the container had become ready before the fault (the scheduler's record): a lost container, not a failed start. */
  @IsBoolean() afterReady!: boolean;
  /** What the container's row says, as the user sees it. */
  @IsString() reason!: string;
}

export const MACHINE_FAULT = defineContract({
  subject: 'tern.machine.*.fault.v1',
  kind: 'event',
  payload: MachineFault,
  stream: 'EVENTS',
  machineIdField: 'machineId',
  description:
    "A fault the control plane observed on a machine itself (a start command unanswered, a container not ready within the scheduler's start limit, a container lost with its machine), never a machine's own report. Sent by the scheduler only, from its outbox `machine_fault_outbox` (written in the statement that failed the container, so none is lost when a scheduler dies), Nats-Msg-Id `<container id>:fault:<kind>`. Read by reputation, which counts each in full against the machine's starts.",
});
