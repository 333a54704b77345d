import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { Ticker } from '#tern/timing';
import { WorkspaceDeletion } from './workspace-deletion.service.js';

export const WORKSPACE_PURGE_SWEEP_EVERY_MS = 30_000;
/** Purges one tick resumes at most, so a backlog never holds the tick (the next one takes the rest). */
const PURGES_PER_TICK = 10;

/**
 * The sweeper of deleted workspaces whose purge did not finish: the gateway deleting one died
 * midway, or a step failed (NATS or the registry unreachable). It runs at start and then every
 * 30 s; each workspace is claimed by one replica (SKIP LOCKED, with a lease that lapses if that
 * replica dies), and a purge takes only what is left.
 */
@Injectable()
export class WorkspacePurgeSweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('workspace-purge-sweeper');
  private readonly ticker = new Ticker(
    { name: 'workspace purge sweeper', everyMs: WORKSPACE_PURGE_SWEEP_EVERY_MS, logger: this.logger, immediate: true },
    () => this.run(),
  );

  constructor(private readonly deletion: WorkspaceDeletion) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  async run(): Promise<void> {
    for (let i = 0; i < PURGES_PER_TICK && !this.ticker.stopping; i++) if (!(await this.deletion.resume())) return;
  }
}
