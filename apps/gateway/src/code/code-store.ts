import { Injectable } from '@nestjs/common';
import { type ObjectInfo, type ObjectStore, Objm } from '@nats-io/obj';
import { CODE_BUCKET } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/** The `code` object store, keyed by the bundle's sha256 hex digest. */
@Injectable()
export class CodeStore {
  private store?: Promise<ObjectStore>;

  constructor(private readonly messaging: Messaging) {}

  /** Opened (created when missing) on first use; a failed open is retried on the next call. */
  private open(): Promise<ObjectStore> {
    if (!this.store) {
      this.store = new Objm(this.messaging.nc).create(this.messaging.ns.bucket(CODE_BUCKET.name), { description: CODE_BUCKET.description });
      this.store.catch(() => (this.store = undefined));
    }
    return this.store;
  }

  async info(hex: string): Promise<ObjectInfo | null> {
    const info = await (await this.open()).info(hex);
    return info && !info.deleted ? info : null;
  }

  async put(hex: string, bundle: Uint8Array): Promise<ObjectInfo> {
    return (await this.open()).putBlob({ name: hex, description: 'code bundle (tar.gz)' }, bundle);
  }
}
