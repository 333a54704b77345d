import { IsBoolean, IsString } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class SandboxRemove {
  @IsId() sandboxId!: string;
  /** e.g. "deleted", "idle timeout", "lifetime": logged by the agent. */
  @IsString() reason!: string;
}

export class SandboxRemoveReply {
  /** true also when the sandbox was already gone: removing is idempotent. */
  @IsBoolean() removed!: boolean;
}

export const AGENT_SANDBOX_REMOVE = defineContract({
  subject: 'tern.agent.*.sandbox.remove.v1',
  kind: 'request',
  payload: SandboxRemove,
  reply: SandboxRemoveReply,
  description:
    "Kill a sandbox's processes and remove its container and files. Token: machine id. Sent by the gateway (DELETE, idle timeout, lifetime); answered by that machine's agent once it is gone.",
});
