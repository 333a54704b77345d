import { createHash } from 'node:crypto';
import type { RegistryAccess } from '#tern/runtime';

/** A layer as it goes to the registry: its compressed bytes and their media type. */
export interface PushedLayer {
  mediaType: string;
  bytes: Buffer;
}

const digestOf = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/**
 * Pushes an image made by hand (layers as given, a config with `config`) over the distribution
 * API with the builder's Basic credentials, the way any client pushes: each blob in one upload,
 * then the OCI manifest. Resolves the manifest's digest and each layer's.
 */
export async function pushOciImage(
  builder: RegistryAccess,
  repository: string,
  layers: readonly PushedLayer[],
  config: object = {},
): Promise<{ digest: string; layers: string[] }> {
  const base = `http://${builder.host}/v2/${repository}`;
  const authorization = `Basic ${Buffer.from(`${builder.username}:${builder.password}`).toString('base64')}`;
  const put = async (bytes: Buffer): Promise<string> => {
    const digest = digestOf(bytes);
    const started = await fetch(`${base}/blobs/uploads/`, { method: 'POST', headers: { authorization } });
    if (started.status !== 202) throw new Error(`upload refused: ${started.status} ${await started.text()}`);
    const url = new URL(started.headers.get('location')!, base);
    url.searchParams.set('digest', digest);
    const done = await fetch(url, {
      method: 'PUT',
      headers: { authorization, 'content-type': 'application/octet-stream' },
      body: bytes,
    });
    if (done.status !== 201) throw new Error(`blob refused: ${done.status} ${await done.text()}`);
    return digest;
  };
  const configBytes = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', config, rootfs: { type: 'layers', diff_ids: [] } }));
  const configDigest = await put(configBytes);
  const layerDigests: string[] = [];
  for (const l of layers) layerDigests.push(await put(l.bytes));
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: configDigest, size: configBytes.length },
      layers: layers.map((l, i) => ({ mediaType: l.mediaType, digest: layerDigests[i], size: l.bytes.length })),
    }),
  );
  const res = await fetch(`${base}/manifests/${digestOf(manifest)}`, {
    method: 'PUT',
    headers: { authorization, 'content-type': 'application/vnd.oci.image.manifest.v1+json' },
    body: manifest,
  });
  if (res.status !== 201) throw new Error(`manifest refused: ${res.status} ${await res.text()}`);
  return { digest: digestOf(manifest), layers: layerDigests };
}
