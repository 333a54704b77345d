import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { type KV, Kvm } from '@nats-io/kv';
import { HEARTBEATS_BUCKET, MACHINE_STATE_CHANGED, MachineStateChanged } from '#tern/contracts';
import { decode, Messaging, NATS_CONNECTION } from '#tern/messaging';
import { fireAndForget, Ticker } from '#tern/timing';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { discoverInventory, inventoryFingerprint } from '../discovery/inventory.js';
import { HeartbeatService } from '../heartbeat/heartbeat.service.js';
import { NatsLink } from '../nats-link.js';

/** How often the hardware is looked at again. */
export const REDISCOVER_EVERY_MS = 5 * 60_000;

/**
 * Keeps the machine known to the control plane. The agent registers again (HTTP, machine
 * token) when
 *  - its inventory changed (a GPU appeared or vanished): the gateway stores it and announces it;
 *  - NATS comes back after an outage longer than the heartbeat TTL: the scheduler has marked it
 *    offline meanwhile, and the answer may name other NATS servers;
 *  - the scheduler's heartbeat snapshot (the `heartbeats` KV bucket, written only for machines
 *    in its registry) has no recent beat of this machine twice in a row while beats are being
 *    published: the control plane forgot it (a restored database, a deleted row).
 * A refused re-registration (the machine's token was revoked) stops the agent with the reason.
 * It also follows machine.state-changed on its own id's subject, so the dashboard shows the scheduler's
 * verdict (ready, unschedulable and why, offline).
 */
@Injectable()
export class RegistrationWatch implements BeforeApplicationShutdown {
  private readonly logger = new Logger('registration');
  private readonly tickers: Ticker[] = [];
  private subscription?: Subscription;
  private misses = 0;
  private busy = false;
  private bucket?: KV;

  constructor(
    private readonly messaging: Messaging,
    private readonly link: NatsLink,
    private readonly heartbeats: HeartbeatService,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
  ) {}

  start() {
    const { registration } = this.ctx;
    this.followStateChanges();
    this.link.onReconnect((outageMs) => {
      if (outageMs > registration.heartbeatTtlSeconds * 1000) {
        fireAndForget(
          'registering again',
          this.logger,
          this.reregister(
            `NATS was unreachable for ${Math.round(outageMs / 1000)} s (heartbeat TTL ${registration.heartbeatTtlSeconds} s)`,
          ),
        );
      }
    });
    const verifyEvery = Math.max(30_000, 3 * registration.heartbeatIntervalSeconds * 1000);
    this.tickers.push(
      new Ticker({ name: 'hardware rediscovery', everyMs: REDISCOVER_EVERY_MS, logger: this.logger, unref: true }, () =>
        this.rediscover(),
      ).start(),
      new Ticker({ name: 'registration check', everyMs: verifyEvery, logger: this.logger, unref: true }, () => this.verifyKnown()).start(),
    );
  }

  private followStateChanges() {
    const own = this.ctx.registration.machineId;
    // Its own machine's subject: the only one its NATS user may hear (nothing about other machines).
    this.subscription = this.nc.subscribe(this.messaging.subject(MACHINE_STATE_CHANGED, [own]), {
      callback: (err, msg) => {
        if (err) return;
        const shown = decode(MachineStateChanged, msg.data).then((d) => {
          if (!d.ok || d.value.machineId !== own) return;
          this.ctx.state.machineState = { state: d.value.to, reason: d.value.reason };
          const text = `the scheduler moved this machine ${d.value.from ?? '(new)'} → ${d.value.to}: ${d.value.reason}`;
          if (d.value.to === 'ready' || d.value.to === 'registered') this.logger.log(text);
          else this.logger.warn(text);
        });
        fireAndForget('showing a machine state change', this.logger, shown);
      },
    });
  }

  async rediscover() {
    const inventory = await discoverInventory();
    this.ctx.state.gpus = inventory.gpus;
    if (inventoryFingerprint(inventory) === inventoryFingerprint(this.ctx.inventory)) return;
    await this.reregister('the hardware inventory changed', inventory);
  }

  /** Whether the scheduler saw a recent beat of this machine; undefined when it cannot tell. */
  async schedulerKnowsUs(): Promise<boolean | undefined> {
    const sent = this.heartbeats.lastSequence;
    if (!this.link.connected || sent < 3) return undefined;
    try {
      // A direct get names the key in its subject: the one read of the bucket this machine's NATS user may make.
      this.bucket ??= await new Kvm(this.nc).open(this.messaging.ns.bucket(HEARTBEATS_BUCKET.name), { allow_direct: true });
      const entry = await this.bucket.get(this.ctx.registration.machineId);
      if (!entry || entry.operation !== 'PUT') return false;
      const seen = (entry.json() as { sequence?: number }).sequence ?? -1;
      // A few beats may be in flight or skipped; far behind means the beats are being ignored.
      return seen >= sent - 3 || seen > sent;
    } catch {
      this.bucket = undefined;
      return undefined;
    }
  }

  private async verifyKnown() {
    const known = await this.schedulerKnowsUs();
    if (known === undefined) return;
    this.misses = known ? 0 : this.misses + 1;
    if (this.misses >= 2) {
      this.misses = 0;
      await this.reregister('the scheduler has no recent heartbeat of this machine');
    }
  }

  private async reregister(reason: string, inventory = this.ctx.inventory) {
    if (this.busy) return;
    this.busy = true;
    try {
      this.logger.log(`registering again: ${reason}`);
      await this.ctx.reregister(reason, inventory);
    } finally {
      this.busy = false;
    }
  }

  async beforeApplicationShutdown() {
    await Promise.all(this.tickers.map((t) => t.stop()));
    this.subscription?.unsubscribe();
  }
}
