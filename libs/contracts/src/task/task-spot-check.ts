import { IsIn, IsInt, IsISO8601, IsObject, IsOptional, IsString, Matches, MaxLength, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

/**
 * A spot check (a deployment's `verify: {sample}`): a completed task run once more, on another
 * verified machine of higher reputation, in a container of the same version; its output is
 * compared byte for byte with the result the task kept. The task's own result, its delivery and
 * its callback never change; the run is no attempt of the task.
 */
export class TaskSpotCheck {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsInt() @Min(1) deploymentVersion!: number;
  @IsId() workspaceId!: string;
  /** The verifier's container that runs it (a ready one of the task's version on this machine). */
  @IsId() containerId!: string;
  /** The attempt whose result is checked: the handler sees the same x-tern-attempt as it did. */
  @IsInt() @Min(1) attempt!: number;
  /** The task's input, as its attempts were given it. */
  @IsObject() payload!: Record<string, unknown>;
  @IsInt() @Min(1) timeoutSeconds!: number;
}

export const AGENT_TASK_SPOT_CHECK = defineContract({
  subject: 'tern.agent.*.task.spot-check.v1',
  kind: 'event',
  payload: TaskSpotCheck,
  description:
    "Run a completed task again to check its result. Token: machine id. Sent by the gateway to the verifier it chose (a verified machine of higher reputation than the one whose result is checked, with a ready container of the task's version); nobody else hears it. The agent answers with tern.task.<machine>.spot-checked.v1. Core NATS: a lost one leaves the check pending until the gateway expires it (the task's timeout plus SPOT_CHECK_MARGIN_SECONDS), which changes nothing of the task and counts against neither machine.",
});

/** `sha256:` and 64 hex digits. */
export const SHA256_DIGEST = /^sha256:[a-f0-9]{64}$/;

/** What the verifier's run of a spot check came to: the digest of its output, or why it has none. */
export class TaskSpotChecked {
  @IsId() taskId!: string;
  @IsId() workspaceId!: string;
  @IsId() deploymentId!: string;
  @IsId() machineId!: string;
  @IsId() containerId!: string;
  @IsIn(['ok', 'error']) outcome!: 'ok' | 'error';
  /** outcome ok: sha256 of the output as the control plane keeps a result (resultBytesForComparison). */
  @IsOptional() @Matches(SHA256_DIGEST, { message: 'resultSha256 must be sha256:<64 hex digits>' }) resultSha256?: string;
  /** outcome error: what went wrong. */
  @IsOptional() @IsString() @MaxLength(2000) error?: string;
  @IsISO8601() at!: string;
}

export const TASK_SPOT_CHECKED = defineContract({
  subject: 'tern.task.*.spot-checked.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: TaskSpotChecked,
  stream: 'EVENTS',
  description:
    "A verifier's answer to tern.agent.<machine>.task.spot-check.v1. Sent by that agent (Nats-Msg-Id `<task id>:spot-checked`); read by the gateway, which believes it only from the machine and container it chose, compares the digest with the task's result and says the verdict in tern.task.spot-check-ended.v1.",
});

export const SPOT_CHECK_VERDICTS = ['agreed', 'disagreed'] as const;
export type SpotCheckVerdict = (typeof SPOT_CHECK_VERDICTS)[number];

/** A spot check's verdict, by the gateway's comparison: `disagreed` is a fact against `machineId`. */
export class TaskSpotCheckEnded {
  @IsId() taskId!: string;
  @IsId() workspaceId!: string;
  @IsId() deploymentId!: string;
  /** The machine whose result was checked (the lease holder of the completed attempt). */
  @IsId() machineId!: string;
  @IsId() verifierMachineId!: string;
  @IsIn(SPOT_CHECK_VERDICTS) verdict!: SpotCheckVerdict;
  @IsISO8601() at!: string;
}

export const TASK_SPOT_CHECK_ENDED = defineContract({
  subject: 'tern.task.spot-check-ended.v1',
  kind: 'event',
  payload: TaskSpotCheckEnded,
  stream: 'EVENTS',
  description:
    "A spot check's verdict: the verifier's output agreed byte for byte with the task's result, or not. Sent by the gateway only (Nats-Msg-Id `<task id>:spot-check-ended`); read by reputation, which counts a disagreement in full against the machine whose result was checked, as a task attempt it failed.",
});

/**
 * The bytes of a result that spot checks compare: a result kept inline is compared as the
 * gateway keeps it, JSON re-serialised (JSON.stringify of the parsed value); a larger one as the
 * bytes stored. The verifier hashes its own output the same way (resultBytesForComparison).
 */
export function resultBytesForComparison(output: Buffer, inlineLimit: number): Buffer {
  if (output.length > inlineLimit) return output;
  return Buffer.from(JSON.stringify(JSON.parse(output.toString('utf8'))), 'utf8');
}

/** Where a task's spot check stands: pending on its verifier, or settled. */
export const SPOT_CHECK_STATES = ['pending', 'agreed', 'disagreed', 'failed', 'skipped', 'expired'] as const;
export type SpotCheckState = (typeof SPOT_CHECK_STATES)[number];

/**
 * A task's spot check as the tasks table keeps it and the task API shows it: `skipped` when no
 * verifier could be chosen (`reason` says why), `failed` when the verifier's run did not answer a
 * result (its error in `reason`; nothing is held against either machine), `expired` when the
 * verifier did not answer within the task's timeout plus SPOT_CHECK_MARGIN_SECONDS (nothing is
 * held against either machine either).
 */
export interface TaskSpotCheckRecord {
  state: SpotCheckState;
  /** The machine whose result was checked (the lease holder of the completed attempt). */
  machineId: string;
  attempt: number;
  /** sha256 of the task's result as kept (resultBytesForComparison). */
  resultSha256: string;
  verifierMachineId?: string;
  verifierContainerId?: string;
  /** sha256 of the verifier's output. */
  verifierSha256?: string;
  reason?: string;
  requestedAt: string;
  checkedAt?: string;
}
