import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, link, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { execa } from 'execa';
import { ImageError } from '../errors.js';

const GZIP_LAYER = 'application/vnd.oci.image.layer.v1.tar+gzip';
const ZSTD_LAYER = 'application/vnd.oci.image.layer.v1.tar+zstd';
const REF_NAME = 'org.opencontainers.image.ref.name';

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

interface Manifest {
  config: Descriptor;
  layers: Descriptor[];
  [key: string]: unknown;
}

interface Index {
  manifests?: (Descriptor & { annotations?: Record<string, string> })[];
  [key: string]: unknown;
}

/**
 * A layout to push `tag` from whose layers from `from` on are zstd, each compressed once: the
 * builder's layout holds gzip (umoci reads no zstd), the registry gets zstd (what agents unpack
 * fastest), and a layer pushed again (every earlier step of a rebuild, a push of the same build
 * to another target) is not recompressed each time, as skopeo's `--dest-compress-format` does.
 * Layers before `from` (the base's) stay as they are, for the push to reuse what the registry
 * holds. The zstd blobs live in a layout of their own inside the builder's (`tern-zstd/`), with
 * hard links to the config and the base's layers: in the builder's layout skopeo would take a
 * zstd blob it finds by digest for a gzip one umoci must read. Resolves `oci:<layout>:<tag>` to
 * push. The caller holds the builder layout's lock.
 */
export async function withZstdLayers(layout: string, tag: string, from: number, zstd = 'zstd'): Promise<string> {
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as Index;
  const entry = index.manifests?.find((m) => m.annotations?.[REF_NAME] === tag);
  if (!entry) throw new ImageError(tag, `no tag ${tag} in the build layout`);
  const push = join(layout, 'tern-zstd');
  const pushTag = `zstd-${hexOf(entry.digest)}`;
  const reference = `oci:${push}:${pushTag}`;
  const pushIndex = await readFile(join(push, 'index.json'), 'utf8').then(
    (t) => JSON.parse(t) as Index,
    () => undefined,
  );
  if (pushIndex?.manifests?.some((m) => m.annotations?.[REF_NAME] === pushTag)) return reference;
  await mkdir(join(push, 'blobs', 'sha256'), { recursive: true });
  await mkdir(join(push, 'made'), { recursive: true });
  await writeFile(join(push, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');

  const manifest = JSON.parse(await readFile(blobPath(layout, entry.digest), 'utf8')) as Manifest;
  await linkBlob(layout, push, manifest.config.digest);
  const layers: Descriptor[] = [];
  for (const [i, layer] of manifest.layers.entries()) {
    if (i >= from && layer.mediaType === GZIP_LAYER) layers.push(await zstdOf(layout, push, layer, zstd));
    else {
      await linkBlob(layout, push, layer.digest);
      layers.push(layer);
    }
  }
  const bytes = Buffer.from(JSON.stringify({ ...manifest, layers }));
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  await writeAtomically(blobPath(push, digest), bytes);
  const next: Index = pushIndex ?? { schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [] };
  next.manifests = [
    ...(next.manifests ?? []),
    { mediaType: entry.mediaType, digest, size: bytes.length, annotations: { [REF_NAME]: pushTag } },
  ];
  await writeAtomically(join(push, 'index.json'), Buffer.from(JSON.stringify(next)));
  return reference;
}

/** A blob of the builder's layout in the push layout too: a hard link (a copy across file systems). */
async function linkBlob(layout: string, push: string, digest: string): Promise<void> {
  const to = blobPath(push, digest);
  if (
    await stat(to).then(
      () => true,
      () => false,
    )
  )
    return;
  await link(blobPath(layout, digest), to).catch(async (e: NodeJS.ErrnoException) => {
    if (e.code === 'EEXIST') return;
    if (e.code !== 'EXDEV' && e.code !== 'EPERM') throw e;
    await copyFile(blobPath(layout, digest), to);
  });
}

/**
 * The zstd copy of a gzip layer: made once (the gzip stream inflated here, compressed by the
 * zstd CLI at its default level, hashed on the way to its blob), then found by the gzip blob's
 * digest in the push layout's `made/`.
 */
async function zstdOf(layout: string, push: string, layer: Descriptor, zstd: string): Promise<Descriptor> {
  const known = join(push, 'made', `${hexOf(layer.digest)}.json`);
  const recorded = await readFile(known, 'utf8').then(
    (t) => JSON.parse(t) as Descriptor,
    () => undefined,
  );
  if (
    recorded &&
    (await stat(blobPath(push, recorded.digest)).then(
      (s) => s.size === recorded.size,
      () => false,
    ))
  )
    return recorded;

  const temp = join(push, 'blobs', 'sha256', `.zstd-${randomBytes(6).toString('hex')}`);
  const hash = createHash('sha256');
  let size = 0;
  const child = execa(zstd, ['-q', '-c', '-T0'], {
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: { stdout: false },
    reject: false,
  });
  try {
    const hashed = new Transform({
      transform(chunk: Buffer, _enc, done) {
        hash.update(chunk);
        size += chunk.length;
        done(null, chunk);
      },
    });
    const [, , result] = await Promise.all([
      pipeline(createReadStream(blobPath(layout, layer.digest)), createGunzip(), child.stdin!),
      pipeline(child.stdout!, hashed, createWriteStream(temp, { mode: 0o644 })),
      child,
    ]);
    if (result.exitCode !== 0) throw new Error(`zstd exited ${result.exitCode}: ${String(result.stderr).trim()}`);
    const descriptor: Descriptor = { mediaType: ZSTD_LAYER, digest: `sha256:${hash.digest('hex')}`, size };
    await rename(temp, blobPath(push, descriptor.digest));
    await writeAtomically(known, Buffer.from(JSON.stringify(descriptor)));
    return descriptor;
  } catch (e) {
    child.kill();
    throw new ImageError(layer.digest, `could not write layer ${layer.digest} as zstd: ${(e as Error).message}`);
  } finally {
    await rm(temp, { force: true });
  }
}

function hexOf(digest: string): string {
  return digest.slice(digest.indexOf(':') + 1);
}

function blobPath(layout: string, digest: string): string {
  return join(layout, 'blobs', 'sha256', hexOf(digest));
}

async function writeAtomically(path: string, bytes: Buffer): Promise<void> {
  const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(temp, bytes, { mode: 0o644 });
  await rename(temp, path);
}
