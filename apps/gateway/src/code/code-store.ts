import { Injectable } from '@nestjs/common';
import type { ObjectInfo, ObjectStore } from '@nats-io/obj';
import { CODE_BUCKET } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/** The `code` object store, keyed by the bundle's sha256 hex digest. */
@Injectable()
export class CodeStore {
  constructor(private readonly messaging: Messaging) {}

  /** Opened (created when missing) on first use; a failed open is retried on the next call. */
  private open(): Promise<ObjectStore> {
    return this.messaging.objectStore({ name: CODE_BUCKET.name, description: CODE_BUCKET.description });
  }

  async info(hex: string): Promise<ObjectInfo | null> {
    const info = await (await this.open()).info(hex);
    return info && !info.deleted ? info : null;
  }

  /** The bundle's bytes; null when the store does not have it. */
  async get(hex: string): Promise<Uint8Array | null> {
    return (await this.open()).getBlob(hex);
  }

  async put(hex: string, bundle: Uint8Array): Promise<ObjectInfo> {
    return (await this.open()).putBlob({ name: hex, description: 'code bundle (tar.gz)' }, bundle);
  }
}
