import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { ImageError } from '../errors.js';
import type { OciMount } from '../oci/oci-spec.js';
import type { UserSpec } from '../types.js';
import { requireSha256Hex } from './digest.js';
import type { PreparedImage } from './prepared-image.js';

interface Descriptor {
  mediaType: string;
  digest: string;
  annotations?: Record<string, string>;
  platform?: { os?: string; architecture?: string };
}

export interface ImageConfig {
  config?: { Env?: string[]; Entrypoint?: string[]; Cmd?: string[]; WorkingDir?: string; User?: string };
}

/** What we keep next to the unpacked rootfs: the image config, already reduced. */
interface CachedImage {
  ref: string;
  digest: string;
  env: string[];
  entrypoint: string[];
  cmd: string[];
  cwd?: string;
  user?: UserSpec;
}

const REF_NAME = 'org.opencontainers.image.ref.name';
const INDEX_TYPES = ['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json'];
const GO_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', ppc64: 'ppc64le', s390x: 's390x' };

// Host networking: the container resolves names as the host does.
const ETC_BINDS = ['/etc/resolv.conf', '/etc/hosts'];

async function readJson<T>(ref: string, path: string): Promise<T> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T;
  } catch (e) {
    throw new ImageError(ref, `cannot read ${path}: ${(e as Error).message}`, { cause: e });
  }
}

/** Where a blob lives in an OCI layout; the digest is checked before it becomes a path. */
export function blobPath(ref: string, layout: string, digest: unknown): string {
  return join(layout, 'blobs', 'sha256', requireSha256Hex(ref, digest));
}

/** The manifest the tag names in an OCI layout, following an index to this platform's entry. */
export async function resolveManifest(ref: string, layout: string, tag: string, arch: string = process.arch): Promise<Descriptor> {
  const index = await readJson<{ manifests?: Descriptor[] }>(ref, join(layout, 'index.json'));
  let desc = index.manifests?.find((m) => m.annotations?.[REF_NAME] === tag);
  if (!desc) throw new ImageError(ref, `no tag "${tag}" in ${layout}`);
  for (let depth = 0; INDEX_TYPES.includes(desc.mediaType); depth++) {
    if (depth > 3) throw new ImageError(ref, 'image index nested too deep');
    const nested: { manifests?: Descriptor[] } = await readJson(ref, blobPath(ref, layout, desc.digest));
    const want = GO_ARCH[arch] ?? arch;
    const next: Descriptor | undefined = nested.manifests?.find((m) => m.platform?.os === 'linux' && m.platform.architecture === want);
    if (!next) throw new ImageError(ref, `no linux/${want} image in the index`);
    desc = next;
  }
  return desc;
}

/** USER from the image config: numbers, or names looked up in the image's own passwd/group. */
export async function resolveImageUser(ref: string, rootfs: string, user: string | undefined): Promise<UserSpec | undefined> {
  if (!user) return undefined;
  const [u, g] = user.split(':') as [string, string | undefined];
  const lookup = async (file: string, name: string, field: number): Promise<number | undefined> => {
    const text = await readFile(join(rootfs, 'etc', file), 'utf8').catch(() => '');
    const line = text.split('\n').find((l) => l.split(':')[0] === name);
    const value = line?.split(':')[field];
    return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
  };
  const uid = /^\d+$/.test(u) ? Number(u) : await lookup('passwd', u, 2);
  if (uid === undefined) throw new ImageError(ref, `user "${u}" is not in the image's /etc/passwd`);
  let gid: number | undefined;
  if (g === undefined) gid = /^\d+$/.test(u) ? uid : await lookup('passwd', u, 3);
  else gid = /^\d+$/.test(g) ? Number(g) : await lookup('group', g, 2);
  if (gid === undefined) throw new ImageError(ref, `group of "${user}" is not in the image`);
  return { uid, gid };
}

/** Mount points runc needs in a read-only rootfs, made once in the cached copy. */
async function addMountPoints(rootfs: string): Promise<void> {
  for (const d of ['proc', 'dev', 'sys', 'tmp', 'etc']) await mkdir(join(rootfs, d), { recursive: true, mode: 0o755 });
  // runc gives the tmpfs on /tmp the mode of the directory it covers.
  await chmod(join(rootfs, 'tmp'), 0o1777);
  for (const f of ETC_BINDS) {
    const p = join(rootfs, f);
    const s = await lstat(p).catch(() => undefined);
    // A symlink (to /run/systemd/resolve/…) would point the bind somewhere else: replace it.
    if (s?.isSymbolicLink()) await unlink(p);
    if (!s || s.isSymbolicLink()) await writeFile(p, '');
  }
}

/**
 * Completes an unpacked image in `tmp` (its `rootfs` there already): mount points, the reduced
 * config beside it, then renamed to `final` in one step, so no half-made image is ever found
 * under its digest. A concurrent preparation that got there first wins.
 */
export async function completeImage(ref: string, digest: string, config: ImageConfig, tmp: string, final: string): Promise<void> {
  await addMountPoints(join(tmp, 'rootfs'));
  const c = config.config ?? {};
  const cached: CachedImage = {
    ref,
    digest,
    env: c.Env ?? [],
    entrypoint: c.Entrypoint ?? [],
    cmd: c.Cmd ?? [],
    ...(c.WorkingDir ? { cwd: c.WorkingDir } : {}),
  };
  const user = await resolveImageUser(ref, join(tmp, 'rootfs'), c.User);
  if (user) cached.user = user;
  await writeFile(join(tmp, 'image.json'), JSON.stringify(cached, null, 2));
  await rename(tmp, final).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ENOTEMPTY' && e.code !== 'EEXIST') throw e;
  });
}

/** The unpacked image at `final` (`<dir>/sha256-<hex>`), or undefined when it is not there (yet). */
export async function unpackedImage(ref: string, final: string): Promise<PreparedImage | undefined> {
  const text = await readFile(join(final, 'image.json'), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const cached = JSON.parse(text) as CachedImage;
  const mounts: OciMount[] = [];
  for (const f of ETC_BINDS) {
    if ((await stat(f).catch(() => undefined))?.isFile())
      mounts.push({ destination: f, type: 'bind', source: f, options: ['bind', 'ro', 'nosuid', 'nodev'] });
  }
  return {
    ref,
    digest: cached.digest,
    rootfs: join(final, 'rootfs'),
    mounts,
    env: cached.env,
    entrypoint: cached.entrypoint,
    cmd: cached.cmd,
    ...(cached.cwd ? { cwd: cached.cwd } : {}),
    ...(cached.user ? { user: cached.user } : {}),
    sharesHostUsr: false,
  };
}

/**
 * An `oci:` image, unpacked with umoci into `<dir>/<manifest hex digest>/rootfs` once; later
 * resolves of any tag pointing at the same manifest reuse it.
 */
export async function prepareOciImage(ref: string, layout: string, tag: string, dir: string, umoci = 'umoci'): Promise<PreparedImage> {
  const manifestDesc = await resolveManifest(ref, layout, tag);
  const digest = manifestDesc.digest;
  const final = join(dir, `sha256-${requireSha256Hex(ref, digest)}`);
  const done = await unpackedImage(ref, final);
  if (done) return done;
  const manifest = await readJson<{ config: Descriptor }>(ref, blobPath(ref, layout, digest));
  const config = await readJson<ImageConfig>(ref, blobPath(ref, layout, manifest.config.digest));
  const tmp = join(dir, `.tmp-${randomBytes(6).toString('hex')}`);
  try {
    await mkdir(tmp, { recursive: true });
    const r = await execa(umoci, ['raw', 'unpack', '--image', `${layout}:${tag}`, join(tmp, 'rootfs')], { reject: false });
    if (r.exitCode !== 0) throw new ImageError(ref, `umoci raw unpack failed: ${r.stderr || r.stdout || r.message}`);
    await completeImage(ref, digest, config, tmp, final);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return (await unpackedImage(ref, final))!;
}
