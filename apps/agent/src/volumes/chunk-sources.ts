import { agentVolumePath, VOLUME_CHUNK_BYTES, type VolumeBlobGrant } from '#tern/contracts';
import { RegistryBlobs, type SiteCacheUse } from '#tern/volumes';
import { callGateway, type GatewayAccess, refusalOf } from '../gateway-data.js';
import type { ChunkBytes } from './chunk-cache.js';

/** Why a volume could not be mounted; the start fails with this message. */
export class VolumeMountError extends Error {
  override name = 'VolumeMountError';
}

/** Where one mounted volume's chunks come from and go to. */
export interface ChunkSource {
  /** Named in errors: which store refused or served a bad chunk. */
  readonly from: string;
  /** Chunks fetched at once, each held whole on its way. */
  readonly parallel: number;
  /** Chunks of a file uploaded at once by a commit (each a buffer of a chunk). */
  readonly uploads: number;
  /** `into`: a buffer of a chunk's size the bytes may be read into (the caller reuses it once done with them). */
  fetch(hex: string, into?: Buffer): Promise<ChunkBytes>;
  /** Stores a chunk for a commit (nothing sent when the store holds it already). */
  upload(hex: string, chunk: Uint8Array): Promise<void>;
}

const CALL_TIMEOUT_MS = 300_000;

/**
 * Chunks straight from the registry (no control-plane process carries them), with a token the
 * gateway signs for this volume's repository only after checking the container is placed on this
 * machine: pull, and push for a read-write mount. Asked again when the registry says it expired.
 * Reads go through the machine's site cache where it has one (commits go to the store).
 */
export function registryChunks(gateway: () => GatewayAccess, containerId: string, volume: string, siteCache?: SiteCacheUse): ChunkSource {
  const blobs = new RegistryBlobs(
    async () => {
      const response = await callGateway(gateway(), `${agentVolumePath(containerId, volume)}/grant`, CALL_TIMEOUT_MS);
      if (!response.ok) throw new VolumeMountError(`volume ${volume}: the gateway refused a store token: ${await refusalOf(response)}`);
      return (await response.json()) as VolumeBlobGrant;
    },
    CALL_TIMEOUT_MS,
    siteCache,
  );
  return {
    from: siteCache ? `the volume store (registry) through the site cache ${siteCache.url}` : 'the volume store (registry)',
    // Each chunk is held whole on its way (at most VOLUME_CHUNK_BYTES): 16 at once keep 64 MiB in flight.
    parallel: 16,
    // The quota is checked at the commit, for all its chunks at once; 8 buffers of a chunk each.
    uploads: 8,
    fetch: (hex, into) => blobs.read(hex, VOLUME_CHUNK_BYTES, into),
    upload: async (hex, chunk) => {
      await blobs.put(hex, chunk);
    },
  };
}

/** Chunks through the gateway, which keeps them in its NATS object store (installations without a registry). */
export function gatewayChunks(gateway: () => GatewayAccess, containerId: string, volume: string): ChunkSource {
  const path = (hex: string) => `${agentVolumePath(containerId, volume)}/chunks/${hex}`;
  return {
    from: 'the gateway',
    // Each chunk is held whole on its way: a few at once keep memory at a few chunks.
    parallel: 4,
    // One at a time: the gateway checks the quota at each upload.
    uploads: 1,
    fetch: async (hex) => {
      const response = await callGateway(gateway(), path(hex), CALL_TIMEOUT_MS);
      if (!response.ok) throw new VolumeMountError(`volume ${volume}: the gateway refused chunk ${hex}: ${await refusalOf(response)}`);
      return new Uint8Array(await response.arrayBuffer());
    },
    upload: async (hex, chunk) => {
      const response = await callGateway(gateway(), path(hex), CALL_TIMEOUT_MS, fetch, chunk);
      if (!response.ok) throw new Error(`volume ${volume}: the gateway refused chunk ${hex}: ${await refusalOf(response)}`);
    },
  };
}
