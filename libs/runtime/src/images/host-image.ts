import { createHash, randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readlink, realpath, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { OciMount } from '../oci/oci-spec.js';
import type { PreparedImage } from './prepared-image.js';

export interface HostImageOptions {
  /** The node binary to make runnable inside (default: the one running the agent). */
  nodePath?: string;
  /** More host paths to bind read-only at the same place. */
  extraBinds?: string[];
}

/** What the host image is made of; its hash is the image digest, so a changed host layout gets a new rootfs. */
export interface HostImageRecipe {
  version: 1;
  /** Top-level symlinks (`bin` → `usr/bin`) on a merged-/usr host. */
  links: Record<string, string>;
  /** Host directories bound read-only at the same path. */
  dirs: string[];
  /** Host files bound read-only at the same path (DNS, hosts, loader cache, time zone). */
  files: string[];
  /** Extra PATH entries (node installed outside /usr). */
  path: string[];
  passwd: string;
  group: string;
}

const TOP_LEVEL = ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];
const ETC_FILES = ['/etc/resolv.conf', '/etc/hosts', '/etc/ld.so.cache', '/etc/localtime', '/etc/nsswitch.conf', '/etc/ssl/openssl.cnf'];
// /etc/ssl/certs, not /etc/ssl: /etc/ssl/private holds the host's keys.
const ETC_DIRS = ['/etc/alternatives', '/etc/ssl/certs', '/etc/ca-certificates'];
const PASSWD = 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n';
const GROUP = 'root:x:0:\nnogroup:x:65534:\n';

async function kind(path: string): Promise<'dir' | 'file' | 'link' | undefined> {
  const s = await lstat(path).catch(() => undefined);
  if (!s) return undefined;
  if (s.isSymbolicLink()) return 'link';
  return s.isDirectory() ? 'dir' : 'file';
}

/** Reads the host's layout: usrmerge links or real /bin, /lib…, where node lives, which /etc files exist. */
export async function hostImageRecipe(options: HostImageOptions = {}): Promise<HostImageRecipe> {
  const links: Record<string, string> = {};
  const dirs = ['/usr'];
  for (const name of TOP_LEVEL) {
    const k = await kind(`/${name}`);
    if (k === 'link') links[name] = await readlink(`/${name}`);
    else if (k === 'dir') dirs.push(`/${name}`);
  }
  const path: string[] = [];
  const node = await realpath(options.nodePath ?? process.execPath);
  if (!isUnder(node, dirs)) {
    // e.g. ~/.nvm/versions/node/v20/bin/node: bind the whole install (its lib/ holds npm).
    const prefix = dirname(dirname(node));
    dirs.push(prefix);
    path.push(dirname(node));
  }
  for (const d of ETC_DIRS) if ((await stat(d).catch(() => undefined))?.isDirectory()) dirs.push(d);
  for (const extra of options.extraBinds ?? []) if (!dirs.includes(extra)) dirs.push(extra);
  const files: string[] = [];
  for (const f of ETC_FILES) if ((await stat(f).catch(() => undefined))?.isFile()) files.push(f);
  return { version: 1, links, dirs, files, path, passwd: PASSWD, group: GROUP };
}

function isUnder(path: string, dirs: string[]): boolean {
  return dirs.some((d) => path === d || path.startsWith(`${d}/`));
}

export function recipeDigest(recipe: HostImageRecipe): string {
  return `sha256:${createHash('sha256').update(JSON.stringify(recipe)).digest('hex')}`;
}

export function hostImageMounts(recipe: HostImageRecipe): OciMount[] {
  const ro = (p: string, recursive: boolean): OciMount => ({
    destination: p,
    type: 'bind',
    source: p,
    options: [recursive ? 'rbind' : 'bind', 'ro', 'nosuid', 'nodev'],
  });
  return [...recipe.dirs.map((d) => ro(d, true)), ...recipe.files.map((f) => ro(f, false))];
}

/**
 * The host image's rootfs: nothing but mount points, the usrmerge links and a minimal
 * passwd/group, so the container sees the host's programs and none of its data. Built once
 * per recipe under `<dir>/<hex digest>`; a concurrent builder losing the rename race drops
 * its copy.
 */
export async function prepareHostImage(dir: string, options: HostImageOptions = {}): Promise<PreparedImage> {
  const recipe = await hostImageRecipe(options);
  const digest = recipeDigest(recipe);
  const final = join(dir, digest.slice('sha256:'.length));
  const rootfs = join(final, 'rootfs');
  if (!(await stat(join(final, 'recipe.json')).catch(() => undefined))) {
    const tmp = join(dir, `.tmp-${randomBytes(6).toString('hex')}`);
    const r = join(tmp, 'rootfs');
    try {
      for (const d of ['proc', 'dev', 'sys', 'tmp', 'run', 'etc', 'root', 'home'])
        await mkdir(join(r, d), { recursive: true, mode: 0o755 });
      // runc gives a tmpfs the mode of the directory it covers.
      await chmod(join(r, 'tmp'), 0o1777);
      for (const [name, target] of Object.entries(recipe.links)) await symlink(target, join(r, name));
      for (const d of recipe.dirs) await mkdir(join(r, d), { recursive: true, mode: 0o755 });
      for (const f of recipe.files) {
        await mkdir(join(r, dirname(f)), { recursive: true, mode: 0o755 });
        await writeFile(join(r, f), '');
      }
      await writeFile(join(r, 'etc/passwd'), recipe.passwd, { mode: 0o644 });
      await writeFile(join(r, 'etc/group'), recipe.group, { mode: 0o644 });
      await writeFile(join(tmp, 'recipe.json'), JSON.stringify(recipe, null, 2));
      await mkdir(dir, { recursive: true });
      await rename(tmp, final).catch(async (e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOTEMPTY' && e.code !== 'EEXIST') throw e;
      });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }
  return {
    ref: 'host',
    digest,
    rootfs,
    mounts: hostImageMounts(recipe),
    env: recipe.path.length ? [`PATH=${[...recipe.path, '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'].join(':')}`] : [],
    entrypoint: [],
    cmd: [],
    sharesHostUsr: true,
  };
}
