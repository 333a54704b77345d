import { ApiProperty } from '@nestjs/swagger';
import { IsOptional, IsString, Length, Matches } from 'class-validator';
import { type CreateMachineRequest, ID_PATTERN } from '#tern/contracts';

export class CreateMachineDto implements CreateMachineRequest {
  @ApiProperty({ example: 'default', description: 'The pool the machine joins; it must exist.' })
  @IsString()
  @Length(1, 63)
  pool!: string;

  @ApiProperty({ required: false, example: 'gpu-box-1', description: 'Defaults to a random id (m-…). Letters, digits, - and _, up to 64.' })
  @IsOptional()
  @Matches(ID_PATTERN, { message: 'machineId must be 1-64 letters, digits, - or _' })
  machineId?: string;
}
