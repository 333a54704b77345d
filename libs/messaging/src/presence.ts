import { createInbox, type NatsConnection } from '@nats-io/transport-node';
import { type Service, type ServiceIdentity, Svcm } from '@nats-io/services';
import { presenceReplies } from '#tern/nats-auth';

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

/**
 * Every process of this namespace that answers a ping within maxWaitMs. The answers come to a
 * subject under presenceReplies, not the connection's inbox: the control-plane services may
 * publish a reply there and nowhere else (libs/nats-auth, ANSWERS_WITH_RESPONSES).
 */
export async function discover(nc: NatsConnection, ns: Namespace, maxWaitMs: number): Promise<PresenceInfo[]> {
  const reply = createInbox(presenceReplies(ns.name));
  const found: PresenceInfo[] = [];
  const prefix = `${ns.name}-`;
  const sub = nc.subscribe(reply, {
    callback: (err, msg) => {
      if (err) return;
      let s: Partial<ServiceIdentity>;
      try {
        s = msg.json<Partial<ServiceIdentity>>();
      } catch {
        return;
      }
      if (typeof s.name !== 'string' || !s.name.startsWith(prefix) || s.metadata?.namespace !== ns.name) return;
      found.push({ role: s.name.slice(prefix.length), id: String(s.id), version: String(s.version), metadata: s.metadata ?? {} });
    },
  });
  nc.publish('$SRV.PING', '', { reply });
  await new Promise((r) => setTimeout(r, maxWaitMs));
  sub.unsubscribe();
  return found;
}
