import { Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { AUTOSCALER_LEADER_BUCKET } from '#tern/contracts';
import { Lease, Messaging } from '#tern/messaging';

/**
 * Only one autoscaler replica publishes scale commands: the one holding the lease in the
 * `autoscaler-leader` bucket. Every replica keeps following deployments and loads, so a new
 * leader acts on its first tick.
 */
@Injectable()
export class LeaderLock implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly lease: Lease;

  constructor(messaging: Messaging) {
    this.lease = new Lease(messaging, AUTOSCALER_LEADER_BUCKET, 'publishes scale commands');
  }

  onApplicationBootstrap() {
    return this.lease.start();
  }

  onApplicationShutdown() {
    return this.lease.stop();
  }

  isLeader(now = Date.now()): boolean {
    return this.lease.held(now);
  }
}
