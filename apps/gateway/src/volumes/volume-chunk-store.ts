import { Injectable } from '@nestjs/common';
import type { ObjectStore } from '@nats-io/obj';
import { VOLUME_CHUNKS_BUCKET } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/**
 * The `volume-chunks` object store. Objects are named `<workspace id>.<sha256 hex>`: identical
 * chunks are stored once per workspace, and a digest says nothing across workspaces.
 */
@Injectable()
export class VolumeChunkStore {
  constructor(private readonly messaging: Messaging) {}

  /** Opened (created when missing) on first use; a failed open is retried on the next call. */
  private open(): Promise<ObjectStore> {
    return this.messaging.objectStore({ name: VOLUME_CHUNKS_BUCKET.name, description: VOLUME_CHUNKS_BUCKET.description });
  }

  async has(workspaceId: string, hex: string): Promise<boolean> {
    const info = await (await this.open()).info(objectName(workspaceId, hex));
    return !!info && !info.deleted;
  }

  /** The chunk's bytes (at most VOLUME_CHUNK_BYTES); null when the store does not have it. */
  async get(workspaceId: string, hex: string): Promise<Uint8Array | null> {
    return (await this.open()).getBlob(objectName(workspaceId, hex));
  }

  async put(workspaceId: string, hex: string, chunk: Uint8Array): Promise<void> {
    await (await this.open()).putBlob({ name: objectName(workspaceId, hex) }, chunk);
  }

  async delete(workspaceId: string, hex: string): Promise<void> {
    await (await this.open()).delete(objectName(workspaceId, hex));
  }
}

function objectName(workspaceId: string, hex: string): string {
  return `${workspaceId}.${hex}`;
}
