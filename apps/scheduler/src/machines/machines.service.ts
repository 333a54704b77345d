import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { MachineHeartbeat } from '#tern/contracts';
import { Machine } from '#tern/persistence';

@Injectable()
export class MachinesService {
  private readonly logger = new Logger('machines');

  constructor(@InjectRepository(Machine) private readonly machines: Repository<Machine>) {}

  /**
   * A heartbeat moves a known machine's last-seen time forward (never back, since
   * redeliveries may arrive late). Unknown machines must register first.
   */
  async recordHeartbeat(beat: MachineHeartbeat): Promise<boolean> {
    const sentAt = new Date(beat.sentAt);
    const result = await this.machines
      .createQueryBuilder()
      .update(Machine)
      .set({ lastHeartbeatAt: sentAt, agentVersion: beat.agentVersion ?? (() => 'agent_version') })
      .where('id = :id', { id: beat.machineId })
      .andWhere('(last_heartbeat_at IS NULL OR last_heartbeat_at < :sentAt)', { sentAt })
      .execute();
    if (!result.affected) {
      const known = await this.machines.existsBy({ id: beat.machineId });
      if (!known) this.logger.warn({ machineId: beat.machineId }, 'heartbeat from an unregistered machine ignored');
      return false;
    }
    return true;
  }
}
