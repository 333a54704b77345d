import { IsIn, IsISO8601, IsString } from 'class-validator';
import { defineContract } from '../contract.js';
import { MACHINE_STATES, type MachineState } from '../domain.js';
import { IsId, IsNullable } from '../validation.js';

export class MachineStateChanged {
  @IsId() machineId!: string;
  @IsString() pool!: string;

  /** null for the machine's first state. */
  @IsNullable() @IsIn(MACHINE_STATES) from!: MachineState | null;
  @IsIn(MACHINE_STATES) to!: MachineState;

  @IsString() reason!: string;
  @IsISO8601() changedAt!: string;
}

export const MACHINE_STATE_CHANGED = defineContract({
  subject: 'tern.machine.*.state-changed.v1',
  kind: 'event',
  payload: MachineStateChanged,
  stream: 'EVENTS',
  machineIdField: 'machineId',
  description:
    "A machine moved between lifecycle states: pending → registered (sent by the gateway when the agent registers); registered → ready or unschedulable on its first heartbeat, between the two when the pool rules or the network test say so, → offline when heartbeats stop for MACHINE_HEARTBEAT_TTL_SECONDS and back when they resume (sent by the scheduler, which owns the registry). Token: the machine id, so an agent subscribes to its own machine's changes only. Nats-Msg-Id: `<machine id>:<to>:<changedAt>`. Read by reputation (uptime) and by the machine itself (its dashboard).",
});

/**
 * The Nats-Msg-Id of a state change: machine, target state and the moment of the transition,
 * so a publish repeated after a lost acknowledgement is stored once.
 */
export function machineStateChangedMsgId(event: Pick<MachineStateChanged, 'machineId' | 'to' | 'changedAt'>): string {
  return `${event.machineId}:${event.to}:${event.changedAt}`;
}
