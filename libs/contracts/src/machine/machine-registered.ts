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
    'An agent made its HTTPS registration call (with a join token, its machine token after a restart, or an operator API token). Sent by the gateway, which has already stored the inventory and moved the machine to registered; read by reputation (starts its history).',
});
