import { Objm, type ObjectStore } from '@nats-io/obj';
import { BODIES_BUCKET } from '#tern/contracts';
import type { Messaging } from '../messaging.js';

/** Bodies nobody picked up (the container vanished) expire with the bucket's TTL. */
const BODY_TTL_MS = 5 * 60_000;

const stores = new WeakMap<Messaging, Promise<ObjectStore>>();

/** The namespaced `bodies` object store, created on first use; shared per Messaging. */
export function bodiesStore(messaging: Messaging): Promise<ObjectStore> {
  let store = stores.get(messaging);
  if (!store) {
    store = new Objm(messaging.nc).create(messaging.ns.bucket(BODIES_BUCKET.name), { ttl: BODY_TTL_MS * 1_000_000 });
    store.catch(() => stores.delete(messaging));
    stores.set(messaging, store);
  }
  return store;
}

export async function putBody(messaging: Messaging, name: string, body: Uint8Array): Promise<void> {
  const store = await bodiesStore(messaging);
  await store.putBlob({ name }, body);
}

/** Reads and deletes a body; null when it is gone (expired, or read already). */
export async function takeBody(messaging: Messaging, name: string): Promise<Uint8Array | null> {
  const store = await bodiesStore(messaging);
  const body = await store.getBlob(name);
  void store.delete(name).catch(() => undefined);
  return body;
}
