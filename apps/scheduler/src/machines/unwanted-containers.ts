import { Injectable, Logger } from '@nestjs/common';
import type { MachineHeartbeat } from '#tern/contracts';
import { ContainersRepository, GroupCommit } from '#tern/persistence';
import { AgentCommands } from './agent-commands.js';
import { HEARTBEAT_BATCH, HEARTBEAT_LINGER_MS } from './machine-registry.js';

/** States in which the scheduler has given a container up. */
const GIVEN_UP = ['stopped', 'failed'];

/** A stop is not repeated for the same container sooner than this. */
const RESEND_MS = 30_000;

/**
 * Containers keep running when their agent dies (so a restart loses no work), but the
 * scheduler may have given them up meanwhile (the machine went offline and they were
 * replaced). A heartbeat lists what the agent runs: a container the scheduler has given up,
 * or placed on another machine, is told to stop. Ids it has no row for are left alone: the
 * scheduler creates every row before it starts a container, so those were not started by
 * this installation's scheduler and are the agent's own reconcile's business.
 */
@Injectable()
export class UnwantedContainers {
  private readonly logger = new Logger('unwanted-containers');
  private readonly sent = new Map<string, number>();

  /** One statement for the beats that arrive together, not one per beat (bench/agents README). */
  private readonly lookups = new GroupCommit<MachineHeartbeat, string[]>((beats) => this.lookUp(beats), {
    maxBatch: HEARTBEAT_BATCH,
    lingerMs: HEARTBEAT_LINGER_MS,
  });

  constructor(
    private readonly containers: ContainersRepository,
    private readonly agents: AgentCommands,
  ) {}

  async check(beat: MachineHeartbeat): Promise<string[]> {
    if (!beat.runningContainers.length) return [];
    const ids = await this.lookups.add(beat);
    const now = Date.now();
    const unwanted = ids.filter((id) => now - (this.sent.get(id) ?? 0) > RESEND_MS);
    for (const id of unwanted) {
      this.sent.set(id, now);
      this.logger.warn({ machineId: beat.machineId, containerId: id }, 'agent runs a container the scheduler does not want: stopping it');
      void this.agents
        .stop(beat.machineId, { containerId: id, graceSeconds: 10, reason: 'given up by the scheduler (its machine was offline)' })
        .catch((e: unknown) => this.logger.warn({ containerId: id, err: (e as Error).message }, 'stop of an unwanted container failed'));
    }
    for (const [id, at] of this.sent) if (now - at > 10 * RESEND_MS) this.sent.delete(id);
    return unwanted;
  }

  /** For each beat, the containers it lists that the scheduler does not want on its machine. */
  private async lookUp(beats: MachineHeartbeat[]): Promise<string[][]> {
    const running = beats.flatMap((b) => b.runningContainers.map((containerId) => ({ machineId: b.machineId, containerId })));
    const unwanted = new Set((await this.containers.unwantedAmong(running, GIVEN_UP)).map((u) => `${u.machineId}/${u.containerId}`));
    return beats.map((b) => b.runningContainers.filter((id) => unwanted.has(`${b.machineId}/${id}`)));
  }
}
