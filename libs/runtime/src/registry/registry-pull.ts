import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { BodyPieces } from '#tern/volumes';
import { ImageError } from '../errors.js';
import { requireSha256Hex } from '../images/digest.js';
import { dropWhiteouts, linkLower, mergeLayer } from '../images/layer-merge.js';
import { type LayerDescriptor, layerTypeProblem, type LowerLink, unpackLayer } from '../images/layer-unpack.js';
import { completeImage, type ImageConfig, unpackedImage } from '../images/oci-image.js';
import type { PreparedImage } from '../images/prepared-image.js';
import { RegistryHttp } from './registry-http.js';
import { parseRegistryRef } from './registry-ref.js';
import type { RegistryAccessList } from './skopeo.js';

export interface RegistryPullOptions {
  /** Progress lines (`Copying blob sha256:… done`), for the container's logs and the dashboard. */
  onProgress?: (line: string) => void;
  /** Layers downloading and unpacking at once (6). */
  parallel?: number;
  /** The platform of an index to take (process.arch). */
  arch?: string;
}

const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
const INDEXES = ['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json'];
const ACCEPT = [MANIFEST, DOCKER_MANIFEST, ...INDEXES].join(', ');
const GO_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', ppc64: 'ppc64le', s390x: 's390x' };

interface Manifest {
  mediaType?: string;
  config?: { digest: string };
  layers?: LayerDescriptor[];
  manifests?: { digest: string; platform?: { os?: string; architecture?: string } }[];
}

/** The image manifest `digest` names, through an index to this platform's; every document checked against its digest. */
async function fetchManifest(ref: string, http: RegistryHttp, digest: string, arch: string): Promise<Manifest> {
  for (let depth = 0; ; depth++) {
    const m = JSON.parse((await http.getVerified(`manifests/${digest}`, digest, ACCEPT)).toString('utf8')) as Manifest;
    if (!m.manifests) return m;
    if (depth > 2) throw new ImageError(ref, 'image index nested too deep');
    const want = GO_ARCH[arch] ?? arch;
    const next = m.manifests.find((d) => d.platform?.os === 'linux' && d.platform.architecture === want);
    if (!next) throw new ImageError(ref, `no linux/${want} image in the index`);
    digest = next.digest;
  }
}

/** Layers downloading and unpacking `parallel` at once, merged in order as each one and those below it are done. */
async function unpackLayers(
  ref: string,
  http: RegistryHttp,
  layers: LayerDescriptor[],
  work: string,
  options: RegistryPullOptions,
): Promise<string> {
  const rootfs = join(work, 'rootfs');
  const unpacked = layers.map(() => {
    let settle!: { resolve: (links: LowerLink[]) => void; reject: (e: unknown) => void };
    const p = new Promise<LowerLink[]>((resolve, reject) => (settle = { resolve, reject }));
    p.catch(() => undefined);
    return { p, ...settle };
  });
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < layers.length) {
      const i = next++;
      const layer = layers[i]!;
      try {
        const open = (pieces: BodyPieces) => http.stream(`blobs/${layer.digest}`, pieces, layer.size);
        const links = await unpackLayer(ref, http.name, layer, open, join(work, `layer-${i}`));
        options.onProgress?.(`Copying blob ${layer.digest} done (${(layer.size / 1e6).toFixed(1)} MB)`);
        unpacked[i]!.resolve(links);
      } catch (e) {
        failed = true;
        unpacked[i]!.reject(e);
        for (const u of unpacked) u.reject(e); // those never started settle too: the merge stops
      }
    }
  };
  const merge = async () => {
    for (const [i, u] of unpacked.entries()) {
      const links = await u.p;
      const dir = join(work, `layer-${i}`);
      if (i === 0) {
        await dropWhiteouts(dir);
        await rename(dir, rootfs);
      } else {
        await mergeLayer(rootfs, dir);
        await rm(dir, { recursive: true, force: true });
      }
      await linkLower(ref, rootfs, links);
    }
  };
  const workers = Array.from({ length: Math.min(options.parallel ?? 6, layers.length) }, worker);
  // Every download and tar settles before the caller sees a failure and removes `work`.
  const results = await Promise.allSettled([...workers, merge()]);
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
  return rootfs;
}

/**
 * Pulls `registry/repo@sha256:…` and unpacks it into `<dir>/sha256-<hex>` (rootfs and image.json)
 * once per digest; an image already there is used without asking the registry. The manifest and
 * config are checked against their digests, each layer streams from the registry into tar as it
 * downloads (several at once) and is checked when it ends: nothing of a pull that fails is
 * left under the image's name.
 */
export async function pullRegistryImage(
  ref: string,
  dir: string,
  access: RegistryAccessList,
  options: RegistryPullOptions = {},
): Promise<PreparedImage> {
  const parsed = parseRegistryRef(ref);
  if (!parsed.digest) throw new ImageError(ref, 'an agent pulls images by digest only (…@sha256:<digest>)');
  const final = join(dir, `sha256-${requireSha256Hex(ref, parsed.digest)}`);
  const cached = await unpackedImage(ref, final);
  if (cached) return cached;
  options.onProgress?.(`pulling ${ref}`);
  const http = new RegistryHttp(
    ref,
    parsed.registry,
    parsed.repository,
    access.find((a) => a.host === parsed.registry),
  );
  const manifest = await fetchManifest(ref, http, parsed.digest, options.arch ?? process.arch);
  if (!manifest.config || !manifest.layers) throw new ImageError(ref, `${http.name} served a manifest without config or layers`);
  for (const l of manifest.layers) {
    const problem = layerTypeProblem(l.mediaType);
    if (problem) throw new ImageError(ref, problem);
    requireSha256Hex(ref, l.digest);
  }
  const configDigest = manifest.config.digest;
  requireSha256Hex(ref, configDigest);
  const config = JSON.parse((await http.getVerified(`blobs/${configDigest}`, configDigest)).toString('utf8')) as ImageConfig;
  const work = join(dir, `.tmp-${randomBytes(6).toString('hex')}`);
  try {
    await mkdir(work, { recursive: true });
    if (manifest.layers.length) await unpackLayers(ref, http, manifest.layers, work, options);
    else await mkdir(join(work, 'rootfs'));
    await completeImage(ref, parsed.digest, config, work, final);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  options.onProgress?.(`pulled ${ref}`);
  return (await unpackedImage(ref, final))!;
}
