import { Injectable } from '@nestjs/common';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  type Contract,
  type ContainerStart,
  type ContainerStartReply,
  type ContainerStop,
  type ContainerStopReply,
} from '#tern/contracts';
import { Messaging, validatePayload } from '#tern/messaging';

/** How long an agent has to accept or refuse; it answers before doing the work. */
const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Orders to one machine's agent over core request/reply (subject token: the machine id).
 * The reply only says whether the agent took the order on; what follows arrives as container
 * events. Failures surface as RequestError: 503 when no agent of that machine listens, 504
 * on timeout, the agent's own code otherwise.
 */
@Injectable()
export class AgentCommands {
  constructor(private readonly messaging: Messaging) {}

  start(machineId: string, command: ContainerStart, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<ContainerStartReply> {
    return this.send(AGENT_CONTAINER_START, machineId, command, timeoutMs);
  }

  stop(machineId: string, command: ContainerStop, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<ContainerStopReply> {
    return this.send(AGENT_CONTAINER_STOP, machineId, command, timeoutMs);
  }

  /** Checks the order against its contract first: a bug here should fail here, not on the worker. */
  private async send<T extends object, R extends object>(
    contract: Contract<T, R>,
    machineId: string,
    command: T,
    timeoutMs: number,
  ): Promise<R> {
    const checked = await validatePayload(contract.payload, command);
    if (!checked.ok) throw new Error(`refusing to send an invalid ${contract.subject} to ${machineId}: ${checked.reason}`);
    return this.messaging.request(contract, command, { tokens: [machineId], timeoutMs });
  }
}
