import { ApiProperty } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsInt, IsNumber, IsOptional, IsString, Length, Max, Min } from 'class-validator';
import type { PoolRulesRequest } from '#tern/contracts';

/** The admission rules a pool may set; shared by create (absent: no rule) and update (null: remove the rule). */
export class PoolRulesDto implements PoolRulesRequest {
  @ApiProperty({
    required: false,
    type: [String],
    example: ['H100', 'A100'],
    description: 'GPU types admitted; matched as whole words of the model ("H100" matches "NVIDIA H100 80GB HBM3"). Empty: any machine.',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(32)
  @IsString({ each: true })
  @Length(1, 64, { each: true })
  allowedGpuTypes?: string[] | null;

  @ApiProperty({
    required: false,
    example: 100,
    description: 'Lowest measured network throughput (Mbit/s, slower of NATS and HTTP) to be schedulable.',
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  minNetworkMbps?: number | null;

  @ApiProperty({
    required: false,
    example: 0.9,
    description:
      "Lowest reputation score (0 to 1) a machine needs to get new containers in this pool; with a deployment's min_reputation the stricter applies. Running containers are not moved; unscored machines pass.",
  })
  @IsOptional()
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @Min(0)
  @Max(1)
  minReputation?: number | null;
}
