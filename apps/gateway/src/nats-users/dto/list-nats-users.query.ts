import { ApiProperty } from '@nestjs/swagger';
import { IsOptional, IsUUID } from 'class-validator';

export class ListNatsUsersQuery {
  @ApiProperty({ required: false, description: "A workspace id; default: the caller's. Only an operator token names another." })
  @IsOptional()
  @IsUUID('all', { message: 'workspace must be a workspace id (a UUID)' })
  workspace?: string;
}
