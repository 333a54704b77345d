import { IsInt, IsOptional, IsString, Min } from 'class-validator';

/** What a container is given; the same numbers decide placement and are metered. */
export class ContainerResources {
  @IsInt() @Min(1) cpuMillicores!: number;
  @IsInt() @Min(1) memoryBytes!: number;
  @IsInt() @Min(0) gpuCount!: number;
  /** GPU model asked for (e.g. "H100"); absent when gpuCount is 0 or any model will do. */
  @IsOptional() @IsString() gpuType?: string;
}
