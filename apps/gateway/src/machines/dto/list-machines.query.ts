import { IsIn, IsOptional, IsString } from 'class-validator';
import { MACHINE_STATES, type MachineState } from '#tern/contracts';

export class ListMachinesQuery {
  @IsOptional()
  @IsString()
  pool?: string;

  @IsOptional()
  @IsIn(MACHINE_STATES)
  state?: MachineState;
}
