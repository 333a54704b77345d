import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SandboxesRepository } from '#tern/persistence';
import { Ticker } from '#tern/timing';
import { SandboxesService } from './sandboxes.service.js';

export const SANDBOX_SWEEP_EVERY_MS = 2_000;

/**
 * The sweeper of sandboxes past their lifetime or idle timeout (terminated, then removed from
 * their machine) and of those whose machine went offline or was removed (lost: nothing to
 * remove). Each row is ended by one statement, so of several gateways one ends it.
 */
@Injectable()
export class SandboxSweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('sandbox-sweeper');
  private readonly ticker = new Ticker({ name: 'sandbox sweeper', everyMs: SANDBOX_SWEEP_EVERY_MS, logger: this.logger }, () => this.run());

  constructor(
    private readonly sandboxes: SandboxesRepository,
    private readonly service: SandboxesService,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  async run(): Promise<void> {
    const ended = await this.sandboxes.endOverdue();
    for (const s of ended) {
      this.logger.log({ sandboxId: s.id, machineId: s.machineId }, `sandbox ${s.id} ${s.state}: ${s.reason}`);
      await this.service.ended(s);
    }
  }
}
