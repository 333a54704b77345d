import { Inject, Injectable } from '@nestjs/common';
import { type NatsConnection } from '@nats-io/transport-node';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { discover, NATS_CONNECTION, Namespace, type PresenceInfo } from '#tern/messaging';
import { SelfHealth } from '#tern/observability';
import type { ControlPlaneRole, SystemHealth } from '#tern/contracts';

export type { SystemHealth } from '#tern/contracts';

/** The control-plane services that must all be up for the system to be ready. */
export const CONTROL_PLANE_ROLES: readonly ControlPlaneRole[] = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'];

/**
 * Asks every Tern process in the namespace to answer a $SRV.PING; a process that died or
 * lost NATS does not answer, so the view is never older than one ping.
 */
@Injectable()
export class SystemHealthService {
  private readonly ns: Namespace;

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
    private readonly self: SelfHealth,
  ) {
    this.ns = new Namespace(config.nats.namespace);
  }

  async check(): Promise<SystemHealth> {
    const [present, own] = await Promise.all([
      this.nc.isClosed()
        ? Promise.resolve([] as PresenceInfo[])
        : discover(this.nc, this.ns, this.config.servicePingTimeoutMs).catch(() => []),
      this.self.check().then(
        (r) => ({ up: true, details: r.details }),
        (e: unknown) => ({ up: false, details: (e as { response?: { details?: unknown } }).response?.details ?? String(e) }),
      ),
    ]);
    const services = {} as SystemHealth['services'];
    for (const role of CONTROL_PLANE_ROLES) {
      const instances = present
        .filter((p) => p.role === role)
        .map((p) => ({ id: p.id, host: p.metadata.host, version: p.version, startedAt: p.metadata.startedAt }));
      services[role] = { status: instances.length ? 'up' : 'down', instances };
    }
    // The gateway answering this request is up only if its own NATS and Postgres are.
    services.gateway = { ...services.gateway, status: own.up ? services.gateway.status : 'down', details: own.details };
    const agents = present
      .filter((p) => p.role === 'agent')
      .map((p) => ({ id: p.id, machineId: p.metadata.machineId, pool: p.metadata.pool, host: p.metadata.host, version: p.version }));
    const ok = CONTROL_PLANE_ROLES.every((r) => services[r].status === 'up');
    return { status: ok ? 'ok' : 'degraded', checkedAt: new Date().toISOString(), services, agents };
  }
}
