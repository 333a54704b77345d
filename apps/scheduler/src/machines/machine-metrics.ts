import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { MachineState } from '#tern/contracts';
import { MachinesRepository, MachineVerificationRepository } from '#tern/persistence';
import { setVerificationCounts } from '../verification/verification-metrics.js';
import { Ticker } from '#tern/timing';

const REFRESH_MS = 10_000;

const machines = new Gauge({
  name: 'tern_machines',
  help: 'Machines per pool and state (pending, registered, ready, unschedulable, offline), from the registry',
  labelNames: ['pool', 'state'],
});

const stateChanges = new Counter({
  name: 'tern_machine_state_changes_total',
  help: 'Machine state changes the scheduler announced, by the state left and the state entered',
  labelNames: ['from', 'to'],
});

const heartbeatInterval = new Histogram({
  name: 'tern_machine_heartbeat_interval_seconds',
  help: 'Time between two heartbeats of one machine as this scheduler received them (its own clock): heartbeat lag and gaps',
  buckets: [1, 2, 5, 7.5, 10, 15, 20, 30, 60, 120, 300],
});

const lastBeat = new Map<string, number>();

/** `from` null: a machine's first state. */
export function countStateChange(from: MachineState | null, to: MachineState): void {
  stateChanges.inc({ from: from ?? 'none', to });
}

export function observeHeartbeat(machineId: string, now = Date.now()): void {
  const last = lastBeat.get(machineId);
  if (last !== undefined) heartbeatInterval.observe((now - last) / 1000);
  lastBeat.set(machineId, now);
}

/** Keeps tern_machines and tern_machine_verification current: the registry's counts every REFRESH_MS (a scrape never waits on Postgres). */
@Injectable()
export class MachineGauges implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('machine-gauges');
  private ticker?: Ticker;

  constructor(
    private readonly repository: MachinesRepository,
    private readonly verification: MachineVerificationRepository,
  ) {}

  onApplicationBootstrap() {
    this.ticker = new Ticker({ name: 'machine gauges', everyMs: REFRESH_MS, logger: this.logger, immediate: true }, () =>
      this.refresh(),
    ).start();
  }

  async onModuleDestroy() {
    await this.ticker?.stop();
  }

  async refresh(): Promise<void> {
    const counts = await this.repository.countMachinesByPoolAndState();
    machines.reset();
    for (const c of counts) machines.set({ pool: c.pool, state: c.state }, c.count);
    setVerificationCounts(await this.verification.countByPoolAndVerification());
  }
}
