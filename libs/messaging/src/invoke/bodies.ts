import type { ObjectStore } from '@nats-io/obj';
import { BODIES_BUCKET } from '#tern/contracts';
import type { Messaging } from '../messaging.js';

/** Bodies nobody picked up (the container vanished) expire with the bucket's TTL. */
const BODY_TTL_MS = 5 * 60_000;

/** The namespaced `bodies` object store, created on first use; shared per Messaging. */
export function bodiesStore(messaging: Messaging): Promise<ObjectStore> {
  return messaging.objectStore({ name: BODIES_BUCKET.name, ttlMs: BODY_TTL_MS });
}

/**
 * A large request body's object name: the machine the request is routed to, then the request
 * id, so the gateway serves it only to that machine (GET /api/v1/agent/bodies/<requestId>).
 */
export function bodyObjectName(machineId: string, requestId: string): string {
  return `${machineId}.${requestId}`;
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
