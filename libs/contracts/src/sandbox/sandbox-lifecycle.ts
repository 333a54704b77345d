import { Type } from 'class-transformer';
import { IsIn, IsISO8601, IsObject, IsString, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { ContainerResources } from '../container/container-resources.js';
import { IsId } from '../validation.js';

/**
 * The deployment id sandboxes' usage is recorded under: sandboxes are metered like containers,
 * as their own line (`group_by=deployment` shows it as "sandboxes").
 */
export const SANDBOX_USAGE_DEPLOYMENT = 'sandbox';

/** A sandbox's life as the gateway itself saw it (its own placement and clock, never a machine's word). */
export class SandboxLifecycle {
  @IsId() sandboxId!: string;
  @IsString() workspaceId!: string;
  @IsId() machineId!: string;
  @IsObject() @ValidateNested() @Type(() => ContainerResources) resources!: ContainerResources;
  @IsISO8601() at!: string;
}

export class SandboxEnded extends SandboxLifecycle {
  @IsIn(['terminated', 'failed', 'lost']) state!: 'terminated' | 'failed' | 'lost';
  @IsString() reason!: string;
}

export const SANDBOX_STARTED = defineContract({
  subject: 'tern.sandbox.started.v1',
  kind: 'event',
  payload: SandboxLifecycle,
  stream: 'EVENTS',
  description:
    "A sandbox's container runs (its agent answered the create). Sent by the gateway, from its own record; read by metering (the sandbox's usage starts here) and reputation (a successful start on that machine).",
});

export const SANDBOX_ENDED = defineContract({
  subject: 'tern.sandbox.ended.v1',
  kind: 'event',
  payload: SandboxEnded,
  stream: 'EVENTS',
  description:
    "A sandbox ended: terminated (DELETE, lifetime, idle timeout), lost with its machine (`at` is then when the gateway's sweeper saw the machine offline), or failed (its machine could not start it). Sent by the gateway; read by metering (usage ends here; a failed one never ran) and reputation (a failed start on that machine).",
});
