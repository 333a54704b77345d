import { IsInt, IsISO8601, Min } from 'class-validator';
import { IsId } from '../validation.js';

/** Fields every container lifecycle event carries, so each event stands alone for metering and reputation. */
export abstract class ContainerEvent {
  @IsId() containerId!: string;
  @IsId() deploymentId!: string;
  @IsInt() @Min(1) deploymentVersion!: number;
  @IsId() workspaceId!: string;
  @IsId() machineId!: string;
  @IsISO8601() at!: string;
}
