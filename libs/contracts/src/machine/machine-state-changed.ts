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
  subject: 'tern.machine.state-changed.v1',
  kind: 'event',
  payload: MachineStateChanged,
  stream: 'EVENTS',
  description:
    'A machine moved between lifecycle states (pending → registered → ready; draining; offline when heartbeats stop; removed). Sent by the scheduler, which owns the registry; read by the gateway (machines API), reputation (uptime) and metering (rewards).',
});
