import { type NatsConnection } from '@nats-io/transport-node';
import { type Service, Svcm } from '@nats-io/services';

// @nats-io/services is still a 3.0 pre-release that bundles its own copy of nats-core; the
// connection object is the same at run time, only the declared types differ.
type ServicesConnection = ConstructorParameters<typeof Svcm>[0];
import { type Namespace } from './namespace.js';

export interface PresenceInfo {
  /** Service role: gateway, scheduler, ..., agent. */
  role: string;
  /** Process instance id assigned by the service API. */
  id: string;
  version: string;
  metadata: Record<string, string>;
}

/**
 * Announces a process on the NATS service API so `$SRV.PING`/`$SRV.INFO` find it as
 * `<namespace>-<role>`. Nothing to renew: when the process or its connection dies it stops answering.
 */
export async function announce(
  nc: NatsConnection,
  ns: Namespace,
  role: string,
  version: string,
  metadata: Record<string, string> = {},
): Promise<Service> {
  return new Svcm(nc as unknown as ServicesConnection).add({
    name: ns.service(role),
    version,
    description: `Tern ${role}`,
    metadata: { role, namespace: ns.name, ...metadata },
  });
}

/** Every process of this namespace that answers a ping within maxWaitMs. */
export async function discover(nc: NatsConnection, ns: Namespace, maxWaitMs: number): Promise<PresenceInfo[]> {
  const client = new Svcm(nc as unknown as ServicesConnection).client({ strategy: 'timer', maxWait: maxWaitMs });
  const found: PresenceInfo[] = [];
  const prefix = `${ns.name}-`;
  for await (const s of await client.ping()) {
    if (!s.name.startsWith(prefix) || s.metadata?.namespace !== ns.name) continue;
    found.push({ role: s.name.slice(prefix.length), id: s.id, version: s.version, metadata: s.metadata ?? {} });
  }
  return found;
}
