import { type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { connectNats } from '#tern/messaging';
import { TEST_NATS } from './isolation.js';

/** The test process's own connection; a loaded machine (load 30 on 2 cores) took more than 5 s to connect. */
export async function connectTestNats(): Promise<NatsConnection> {
  return connectNats({ ...TEST_NATS, name: 'tern-test', firstConnectTimeoutMs: 30_000 });
}

/** Deletes every stream, KV bucket and object store of the namespaces that start with prefix. */
export async function deleteNamespaces(prefix: string): Promise<number> {
  const nc = await connectTestNats();
  try {
    const jsm = await jetstreamManager(nc);
    let deleted = 0;
    for await (const name of jsm.streams.names()) {
      const bare = name.replace(/^(KV|OBJ)_/, '');
      if (bare.startsWith(prefix)) {
        await jsm.streams.delete(name).catch(() => undefined);
        deleted++;
      }
    }
    return deleted;
  } finally {
    await nc.close();
  }
}
