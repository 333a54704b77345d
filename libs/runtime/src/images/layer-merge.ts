import { chmod, lchown, link, lstat, lutimes, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ImageError } from '../errors.js';
import type { LowerLink } from './layer-unpack.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';

/**
 * Lays an unpacked layer over the root filesystem of the layers below it, as OCI whiteouts say:
 * `.wh..wh..opq` empties its directory of what lower layers put there, `.wh.<name>` removes
 * `<name>`, everything else replaces what was there, directories merging with directories. The
 * layer's entries are moved (renamed), not copied, so owners, modes, xattrs and its own hard
 * links stay as tar made them. Only real directories are descended into, never a symlink.
 */
export async function mergeLayer(rootfs: string, layer: string): Promise<void> {
  await mergeDir(rootfs, layer);
}

/** Removes whiteouts from a directory no lower layer holds (the bottom layer, a new directory): nothing under it to hide. */
export async function dropWhiteouts(dir: string): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    if (e.name.startsWith(WHITEOUT)) await rm(join(dir, e.name), { recursive: true, force: true });
    else if (e.isDirectory()) await dropWhiteouts(join(dir, e.name));
  }
}

async function mergeDir(dst: string, src: string): Promise<void> {
  const names = await readdir(src);
  if (names.includes(OPAQUE)) for (const n of await readdir(dst)) await rm(join(dst, n), { recursive: true, force: true });
  // Whiteouts first: they hide lower layers only, never an entry of this layer beside them.
  for (const n of names)
    if (n.startsWith(WHITEOUT) && n !== OPAQUE) await rm(join(dst, n.slice(WHITEOUT.length)), { recursive: true, force: true });
  for (const n of names) {
    if (n.startsWith(WHITEOUT)) continue;
    const from = join(src, n);
    const to = join(dst, n);
    const s = await lstat(from);
    const d = await lstat(to).catch(() => undefined);
    if (s.isDirectory() && d?.isDirectory()) await mergeDir(to, from);
    else {
      if (d) await rm(to, { recursive: true, force: true });
      if (s.isDirectory()) await dropWhiteouts(from);
      await rename(from, to);
    }
  }
  await copyMetadata(dst, src);
}

/** A directory both layers hold takes the upper one's owner, mode and times (its xattrs stay the lower one's). */
async function copyMetadata(dst: string, src: string): Promise<void> {
  const s = await lstat(src);
  if (process.getuid?.() === 0) await lchown(dst, s.uid, s.gid);
  await chmod(dst, s.mode & 0o7777);
  await lutimes(dst, s.atime, s.mtime);
}

/**
 * `rootfs/<rel>` with every directory on the way a real one (no symlink, no `..`): a link a
 * layer names must not reach outside the image through a symlink a lower layer planted.
 */
async function inside(image: string, rootfs: string, rel: string): Promise<string> {
  const parts = rel.split('/').filter((p) => p && p !== '.');
  if (!parts.length || parts.includes('..')) throw new ImageError(image, `a layer links ${JSON.stringify(rel)}, outside the image`);
  let at = rootfs;
  for (const p of parts.slice(0, -1)) {
    at = join(at, p);
    if (!(await lstat(at).catch(() => undefined))?.isDirectory())
      throw new ImageError(image, `a layer links ${JSON.stringify(rel)} through ${JSON.stringify(p)}, which is not a directory`);
  }
  return join(at, parts.at(-1)!);
}

/** Makes the hard links a layer holds to lower layers' files, once that layer is merged. */
export async function linkLower(image: string, rootfs: string, links: readonly LowerLink[]): Promise<void> {
  for (const l of links) {
    const target = await inside(image, rootfs, l.target);
    const path = await inside(image, rootfs, l.path);
    const t = await lstat(target).catch(() => undefined);
    if (!t || t.isDirectory())
      throw new ImageError(image, `a layer links ${JSON.stringify(l.path)} to ${JSON.stringify(l.target)}, which no lower layer holds`);
    await rm(path, { recursive: true, force: true });
    await link(target, path);
  }
}
