import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { ImageError } from '../errors.js';
import { type RegistryAccessList, type SkopeoOptions, skopeoCopy } from './skopeo.js';

export interface BaseImageOptions extends SkopeoOptions {
  /** Debian suite; default bookworm. */
  suite?: string;
  /** Debian archive; default http://deb.debian.org/debian. */
  mirror?: string;
  /** debootstrap variant: `minbase` (default, apt and dpkg only) or `buildd`. */
  variant?: 'minbase' | 'buildd';
  /** Packages added to the variant's; default python3 and ca-certificates (Tern's Python runner, HTTPS). */
  include?: string[];
  /** Where the debootstrapped root filesystem and the OCI layout are kept between builds. */
  cacheDir: string;
  debootstrap?: string;
  umoci?: string;
}

export const BASE_IMAGE_PACKAGES = ['python3', 'ca-certificates'];
const PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

async function exists(path: string): Promise<boolean> {
  return Boolean(await stat(path).catch(() => undefined));
}

async function run(image: string, what: string, cmd: string, args: string[], onProgress?: (line: string) => void): Promise<void> {
  const child = execa(cmd, args, { reject: false, all: true });
  child.all?.setEncoding('utf8');
  const tail: string[] = [];
  child.all?.on('data', (chunk: string) => {
    for (const line of chunk.split('\n').filter((l) => l.trim())) {
      tail.push(line);
      if (tail.length > 20) tail.shift();
      onProgress?.(line);
    }
  });
  const r = await child;
  if (r.exitCode !== 0)
    throw new ImageError(image, `${what} failed (exit ${r.exitCode ?? r.signal}):\n${tail.join('\n') || r.shortMessage}`);
}

/**
 * Tern's Debian base: debootstrap from Debian's archive (no public registry is reachable from
 * every site), one layer, pushed to `target` (`host/repo:tag`). The root filesystem is kept in
 * `cacheDir` per recipe, so a second push (another registry, a lost one) skips debootstrap.
 * Resolves the pushed manifest's digest.
 */
export async function buildBaseImage(target: string, access: RegistryAccessList, options: BaseImageOptions): Promise<string> {
  const suite = options.suite ?? 'bookworm';
  const mirror = options.mirror ?? 'http://deb.debian.org/debian';
  const variant = options.variant ?? 'minbase';
  const include = options.include ?? BASE_IMAGE_PACKAGES;
  const say = options.onProgress;
  const recipe = createHash('sha256').update(JSON.stringify({ suite, mirror, variant, include })).digest('hex').slice(0, 16);
  const rootfs = join(options.cacheDir, `debian-${suite}-${recipe}`, 'rootfs');
  await mkdir(options.cacheDir, { recursive: true });

  if (!(await exists(rootfs))) {
    const tmp = join(options.cacheDir, `.tmp-${randomBytes(6).toString('hex')}`);
    try {
      say?.(`debootstrap ${suite} (${variant}${include.length ? ` + ${include.join(', ')}` : ''}) from ${mirror}`);
      const args = [
        `--variant=${variant}`,
        ...(include.length ? [`--include=${include.join(',')}`] : []),
        suite,
        join(tmp, 'rootfs'),
        mirror,
      ];
      await run(target, 'debootstrap', options.debootstrap ?? 'debootstrap', args, say);
      // Downloaded packages and indexes only make the layer bigger; `apt-get update` refetches them.
      for (const d of ['var/cache/apt/archives', 'var/lib/apt/lists']) {
        for (const f of await readdir(join(tmp, 'rootfs', d)).catch(() => [] as string[]))
          if (f !== 'partial' && f !== 'lock') await rm(join(tmp, 'rootfs', d, f), { recursive: true, force: true });
      }
      await writeFile(join(tmp, 'rootfs', 'etc', 'tern-base'), `debian ${suite} ${variant} ${include.join(',')}\n`);
      await mkdir(join(options.cacheDir, `debian-${suite}-${recipe}`), { recursive: true });
      // Another process building the same recipe at once may have renamed its copy first: the
      // rename is atomic, so the rootfs there is whole, and this one is thrown away.
      await rename(join(tmp, 'rootfs'), rootfs).catch(async (e: NodeJS.ErrnoException) => {
        if (!['ENOTEMPTY', 'EEXIST'].includes(e.code ?? '') || !(await exists(rootfs))) throw e;
        say?.(`debootstrap ${suite}: built at the same time by another process; using its copy`);
      });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  } else say?.(`debootstrap ${suite}: cached in ${rootfs}`);

  // The root filesystem packed into one layer, kept beside it (packing gzips it all): every later
  // push of this recipe sends the same layer, so a registry that has it from before takes none.
  const config = [
    ['--config.env', PATH],
    ['--config.env', 'LANG=C.UTF-8'],
    ['--config.cmd', '/bin/sh'],
    ['--config.workingdir', '/'],
    ['--config.label', `org.opencontainers.image.title=tern-base-${suite}`],
  ].flat();
  const packed = join(
    options.cacheDir,
    `debian-${suite}-${recipe}`,
    `layout-${createHash('sha256').update(config.join('\n')).digest('hex').slice(0, 16)}`,
  );
  if (!(await exists(packed))) {
    const layout = join(options.cacheDir, `.layout-${randomBytes(6).toString('hex')}`);
    const umoci = options.umoci ?? 'umoci';
    try {
      const image = `${layout}:base`;
      await run(target, 'umoci init', umoci, ['init', '--layout', layout]);
      await run(target, 'umoci new', umoci, ['new', '--image', image]);
      say?.('packing the root filesystem into one layer');
      await run(target, 'umoci insert', umoci, ['insert', '--image', image, '--history.created_by', `debootstrap ${suite}`, rootfs, '/']);
      await run(target, 'umoci config', umoci, ['config', '--image', image, ...config]);
      // As with the rootfs: a copy renamed there first by another process is whole, and used.
      await rename(layout, packed).catch(async (e: NodeJS.ErrnoException) => {
        if (!['ENOTEMPTY', 'EEXIST'].includes(e.code ?? '') || !(await exists(packed))) throw e;
      });
    } finally {
      await rm(layout, { recursive: true, force: true });
    }
  }
  say?.(`pushing to ${target}`);
  return await skopeoCopy(target, `oci:${packed}:base`, `docker://${target}`, access, options);
}
