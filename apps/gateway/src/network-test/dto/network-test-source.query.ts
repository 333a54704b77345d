import { ApiProperty } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, Max, Min } from 'class-validator';
import { NETWORK_TEST_HTTP_MAX_BYTES } from '#tern/contracts';

export class NetworkTestSourceQuery {
  @ApiProperty({ description: 'Bytes to send back', minimum: 0, maximum: NETWORK_TEST_HTTP_MAX_BYTES })
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(NETWORK_TEST_HTTP_MAX_BYTES)
  bytes!: number;
}
