import { Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { MachineHeartbeat } from '#tern/contracts';
import { AgentCommands } from './agent-commands.js';

/** States in which the scheduler still wants a container to run (or to finish stopping). */
const WANTED = ['pending', 'scheduled', 'starting', 'running', 'stopping'];

/** A stop is not repeated for the same container sooner than this. */
const RESEND_MS = 30_000;

/**
 * Containers keep running when their agent dies (so a restart loses no work), but the
 * scheduler may have given them up meanwhile (the machine went offline and they were
 * replaced). A heartbeat lists what the agent runs: whatever the scheduler no longer wants,
 * or never knew, is told to stop, so nothing runs unaccounted for.
 */
@Injectable()
export class UnwantedContainers {
  private readonly logger = new Logger('unwanted-containers');
  private readonly sent = new Map<string, number>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly agents: AgentCommands,
  ) {}

  async check(beat: MachineHeartbeat): Promise<string[]> {
    if (!beat.runningContainers.length) return [];
    const rows: { id: string }[] = await this.dataSource.query(
      `SELECT id FROM containers WHERE id = ANY($1) AND machine_id = $2 AND state = ANY($3)`,
      [beat.runningContainers, beat.machineId, WANTED],
    );
    const wanted = new Set(rows.map((r) => r.id));
    const now = Date.now();
    const unwanted = beat.runningContainers.filter((id) => !wanted.has(id) && now - (this.sent.get(id) ?? 0) > RESEND_MS);
    for (const id of unwanted) {
      this.sent.set(id, now);
      this.logger.warn({ machineId: beat.machineId, containerId: id }, 'agent runs a container the scheduler does not want: stopping it');
      void this.agents
        .stop(beat.machineId, { containerId: id, graceSeconds: 10, reason: 'not wanted by the scheduler (given up while its machine was offline, or unknown)' })
        .catch((e: unknown) => this.logger.warn({ containerId: id, err: (e as Error).message }, 'stop of an unwanted container failed'));
    }
    for (const [id, at] of this.sent) if (now - at > 10 * RESEND_MS) this.sent.delete(id);
    return unwanted;
  }
}
