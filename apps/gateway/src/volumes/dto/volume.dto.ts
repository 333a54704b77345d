import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsInt,
  IsISO8601,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { VOLUME_NAME, VOLUME_NAME_RULE } from '#tern/contracts';

export class CreateVolumeDto {
  @ApiProperty({ example: 'models', description: VOLUME_NAME_RULE })
  @Matches(VOLUME_NAME, { message: `name must be ${VOLUME_NAME_RULE}` })
  name!: string;
}

/** `?path=`: a path inside the volume (a leading `/` is the volume's root). */
export class VolumePathQuery {
  @ApiPropertyOptional({ example: 'models/weights.bin' })
  @IsOptional()
  @IsString()
  @MaxLength(4096)
  path?: string;
}

/** `?path=&mode=` of an upload. */
export class VolumePutQuery extends VolumePathQuery {
  @ApiPropertyOptional({ example: '644', description: 'octal permission bits (default 644)' })
  @IsOptional()
  @IsString()
  mode?: string;
}

/** One file a machine's commit writes: its chunks were uploaded first. */
export class VolumeFileWriteDto {
  @IsString() @MaxLength(4096) path!: string;
  @IsInt() @Min(0) @Max(0o7777) mode!: number;
  @IsISO8601() mtime!: string;
  @IsArray()
  @ArrayMaxSize(1_000_000)
  @Matches(/^[a-f0-9]{64}$/, { each: true, message: 'chunks must be sha256 hex digests' })
  chunks!: string[];
}

export class VolumeCommitDto {
  @ApiProperty({ description: 'The volume version the mount started from: files changed by others since are reported as overwritten' })
  @IsInt()
  @Min(0)
  baseVersion!: number;

  @IsArray() @ArrayMaxSize(1_000_000) @ValidateNested({ each: true }) @Type(() => VolumeFileWriteDto) writes!: VolumeFileWriteDto[];

  @IsArray() @ArrayMaxSize(1_000_000) @IsString({ each: true }) @MaxLength(4096, { each: true }) removals!: string[];
}

export class AgentVolumeParams {
  @Matches(/^[A-Za-z0-9_.-]{1,128}$/, { message: 'containerId must be a container id' }) containerId!: string;
  @Matches(VOLUME_NAME, { message: `name must be ${VOLUME_NAME_RULE}` }) name!: string;
}

export class AgentChunkParams extends AgentVolumeParams {
  @Matches(/^[a-f0-9]{64}$/, { message: 'hex must be a sha256 hex digest (64 lower-case hex digits)' }) hex!: string;
}
