import { IsOptional, IsString } from 'class-validator';
import { WindowQuery } from '../../deployments/dto/window.query.js';

export class TaskStatsQuery extends WindowQuery {
  /** A deployment name of the caller's workspace; default every deployment. */
  @IsOptional() @IsString() deployment?: string;
}
