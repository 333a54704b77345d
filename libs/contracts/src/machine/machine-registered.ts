import { IsISO8601, IsString } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class MachineRegistered {
  @IsId() machineId!: string;
  @IsString() pool!: string;
  @IsString() hostname!: string;
  @IsString() agentVersion!: string;
  @IsISO8601() registeredAt!: string;
}

export const MACHINE_REGISTERED = defineContract({
  subject: 'tern.machine.registered.v1',
  kind: 'event',
  payload: MachineRegistered,
  stream: 'EVENTS',
  description:
    'A machine redeemed its join token: the agent made its one HTTPS registration call. Sent by the gateway; read by the scheduler (adds it to the registry, pending → registered) and reputation (starts its history).',
});
