import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { join } from 'node:path';
import { execa } from 'execa';
import type { ImageBuild } from '#tern/contracts';
import { ImageError } from '../errors.js';
import { type RegistryAccessList, skopeoCopy } from './skopeo.js';
import { withZstdLayers } from './zstd-layers.js';

/** One step of a build: one layer. */
export interface BuildStep {
  /** `apt`, `pip`, `npm` or `commands`, with its index: what a failure names. */
  name: string;
  /** What the step installs or runs, for its progress line (`python3-numpy libgomp1`). */
  summary: string;
  /** The shell command run in the image (as root, with the build's network). */
  run: string;
  /**
   * Work on the builder before the step, into a directory bound read-only at /tern/stage: npm
   * packages are fetched with the builder's npm (an image need not carry npm to use them).
   */
  stage?: (dir: string) => Promise<void>;
}

/** Where `npm:` packages go in the image; the image's NODE_PATH, so a handler's require() finds them. */
export const NPM_MODULES = '/usr/local/lib/node_modules';

export interface BuildOptions {
  /** The registry reference of the base (`host/repo:tag` or `@sha256:`). */
  base: string;
  /** Where to push the result (`host/repo:tag`). */
  target: string;
  access: RegistryAccessList;
  /** The builder's OCI layout: layers are cached there by key between builds. */
  layout: string;
  /** Scratch space for the step bundles. */
  workDir: string;
  /** A directory bound read-only at /tern/context (pip_wheels lives there). */
  context?: string;
  /** Progress and the steps' output, line by line. */
  onLog?: (line: string) => void;
  /** Each step as it starts (or is found in the cache); without it, onLog gets `[2/5] apt: python3-numpy`. */
  onStep?: (step: BuildProgress) => void;
  runc?: string;
  umoci?: string;
}

/** A step as the build reaches it: 1-based `index` of `total`. */
export interface BuildProgress {
  index: number;
  total: number;
  name: string;
  summary: string;
  cached: boolean;
}

/** `[2/5] apt: python3-numpy (cached)`: the progress line of a step. */
export function progressLine(p: BuildProgress): string {
  return `[${p.index}/${p.total}] ${p.name}: ${p.summary}${p.cached ? ' (cached)' : ''}`;
}

export interface BuildResult {
  digest: string;
  /** Per step: whether its layer came from the cache. */
  steps: { name: string; cached: boolean; key: string }[];
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The steps of a build in order: apt, pip, npm, then each command. env and workdir go to the config. */
export function buildSteps(build: ImageBuild): BuildStep[] {
  const steps: BuildStep[] = [];
  if (build.apt?.length)
    steps.push({
      name: 'apt',
      summary: build.apt.join(' '),
      // apt's indexes, its two package caches (40 MiB each) and the downloaded .debs are no part of
      // what was installed: left in, they were most of every apt layer's bytes.
      run: `apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ${build.apt.map(quote).join(' ')} && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb`,
    });
  if (build.pip?.length) {
    const from = build.pip_wheels
      ? `--no-index --find-links ${quote(`/tern/context/${build.pip_wheels}`)}`
      : build.pip_index_url
        ? `--index-url ${quote(build.pip_index_url)}`
        : '';
    steps.push({
      name: 'pip',
      summary: build.pip.join(' '),
      run: `python3 -m pip install --no-cache-dir --break-system-packages ${from} ${build.pip.map(quote).join(' ')}`.replace(/ +/g, ' '),
    });
  }
  if (build.npm?.length) {
    const packages = build.npm;
    steps.push({
      name: 'npm',
      summary: packages.join(' '),
      // The packages are part of the command, so they are part of the layer's cache key.
      run: `# npm install ${packages.map(quote).join(' ')}\nmkdir -p ${NPM_MODULES} && cp -a /tern/stage/node_modules/. ${NPM_MODULES}/`,
      stage: async (dir) => {
        await writeFile(join(dir, 'package.json'), '{"private":true}');
        const r = await execa('npm', ['install', '--no-fund', '--no-audit', '--omit=dev', '--prefix', dir, ...packages], {
          reject: false,
          all: true,
        });
        if (r.exitCode !== 0) throw new Error(`npm install failed:\n${String(r.all).split('\n').slice(-15).join('\n')}`);
      },
    });
  }
  (build.commands ?? []).forEach((c, i) => steps.push({ name: `commands[${i}]`, summary: c, run: c }));
  return steps;
}

/** hash(parent layer's manifest digest, step): a layer's cache key. */
export function layerKey(parentDigest: string, step: BuildStep): string {
  return createHash('sha256').update(`${parentDigest}\n${step.run}`).digest('hex');
}

async function manifestDigest(layout: string, tag: string): Promise<string | undefined> {
  const text = await readFile(join(layout, 'index.json'), 'utf8').catch(() => undefined);
  const index = text ? (JSON.parse(text) as { manifests?: { digest: string; annotations?: Record<string, string> }[] }) : {};
  return index.manifests?.find((m) => m.annotations?.['org.opencontainers.image.ref.name'] === tag)?.digest;
}

/** How many layers the manifest a tag points at has. */
async function layerCount(layout: string, tag: string): Promise<number> {
  const digest = await manifestDigest(layout, tag);
  if (!digest) throw new ImageError(tag, `no tag ${tag} in the build layout`);
  const manifest = JSON.parse(await readFile(join(layout, 'blobs', 'sha256', digest.slice('sha256:'.length)), 'utf8')) as {
    layers: unknown[];
  };
  return manifest.layers.length;
}

// Docker's default set: what apt and dpkg need to install packages as root in the image.
const CAPS = [
  'CHOWN',
  'DAC_OVERRIDE',
  'FSETID',
  'FOWNER',
  'MKNOD',
  'NET_RAW',
  'SETGID',
  'SETUID',
  'SETFCAP',
  'SETPCAP',
  'NET_BIND_SERVICE',
  'SYS_CHROOT',
  'KILL',
  'AUDIT_WRITE',
].map((c) => `CAP_${c}`);

/** A bundle umoci unpacked, and the runtime config it came with (each step's own is made from that). */
interface Bundle {
  dir: string;
  config: string;
}

/** Runs one step in `bundle`; rejects with the step and the tail of its output. */
async function runStep(target: string, bundle: Bundle, step: BuildStep, options: BuildOptions, stage?: string): Promise<void> {
  const configPath = join(bundle.dir, 'config.json');
  const config = JSON.parse(bundle.config) as {
    process: { terminal: boolean; args: string[]; env: string[]; capabilities: Record<string, string[]>; cwd: string };
    root: { path: string; readonly?: boolean };
    linux: { namespaces: { type: string }[] };
    mounts: { destination: string; type: string; source: string; options: string[] }[];
  };
  config.process.terminal = false;
  config.process.args = ['/bin/sh', '-c', step.run];
  config.process.env = [...config.process.env.filter((e) => !e.startsWith('DEBIAN_FRONTEND=')), 'DEBIAN_FRONTEND=noninteractive'];
  for (const k of Object.keys(config.process.capabilities)) config.process.capabilities[k] = CAPS;
  config.root.readonly = false;
  // The build's outbound network: the builder's own (see docs: builds run on the builder with network allow).
  config.linux.namespaces = config.linux.namespaces.filter((n) => n.type !== 'network');
  config.mounts.push({ destination: '/etc/resolv.conf', type: 'bind', source: '/etc/resolv.conf', options: ['bind', 'ro'] });
  if (options.context)
    config.mounts.push({ destination: '/tern/context', type: 'bind', source: options.context, options: ['rbind', 'ro'] });
  await mkdir(join(bundle.dir, 'rootfs', 'tern', 'context'), { recursive: true });
  if (stage) {
    config.mounts.push({ destination: '/tern/stage', type: 'bind', source: stage, options: ['rbind', 'ro'] });
    await mkdir(join(bundle.dir, 'rootfs', 'tern', 'stage'), { recursive: true });
  }
  await writeFile(join(bundle.dir, 'rootfs', 'etc', 'resolv.conf'), '').catch(() => undefined);
  await writeFile(configPath, JSON.stringify(config));

  const id = `tern-build-${randomBytes(4).toString('hex')}`;
  const tail: string[] = [];
  const child = execa(options.runc ?? 'runc', ['run', '--bundle', bundle.dir, id], { reject: false, all: true, stdin: 'ignore' });
  child.all?.setEncoding('utf8');
  let partial = '';
  child.all?.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const l of lines) {
      tail.push(l);
      if (tail.length > 30) tail.shift();
      options.onLog?.(`  ${l}`);
    }
  });
  const r = await child;
  await execa(options.runc ?? 'runc', ['delete', '--force', id], { reject: false });
  // The directories made for the binds are not the step's: they stay out of the layer.
  await rm(join(bundle.dir, 'rootfs', 'tern'), { recursive: true, force: true });
  if (r.exitCode !== 0)
    throw new ImageError(
      target,
      `step ${step.name} failed (exit ${r.exitCode ?? r.signal}): ${step.run}\n${[...tail, partial].filter(Boolean).slice(-20).join('\n')}`,
    );
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * One build at a time per layout, across processes (`<layout>.lock`, holding the builder's pid;
 * a dead holder's lock is taken over). Two builds of the same spec thereby build once: the
 * second finds every layer in the cache.
 */
async function withLayoutLock<T>(layout: string, say: (line: string) => void, fn: () => Promise<T>): Promise<T> {
  const path = `${layout}.lock`;
  await mkdir(dirname(path), { recursive: true });
  for (let waited = false; ;) {
    try {
      const fh = await open(path, 'wx');
      await fh.writeFile(String(process.pid));
      await fh.close();
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const holder = Number(await readFile(path, 'utf8').catch(() => '0'));
      if (holder && !alive(holder)) {
        await rm(path, { force: true });
        continue;
      }
      if (!waited) say('waiting for another build on this builder to finish (its layers will be reused)');
      waited = true;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(path, { force: true });
  }
}

/** `parentTag` unpacked into a new bundle in the build's work directory (removed again if that fails). */
async function unpackBundle(options: BuildOptions, umoci: string, parentTag: string): Promise<Bundle> {
  const dir = join(options.workDir, `bundle-${randomBytes(4).toString('hex')}`);
  try {
    const u = await execa(umoci, ['unpack', '--image', `${options.layout}:${parentTag}`, dir], { reject: false, all: true });
    if (u.exitCode !== 0) throw new ImageError(options.target, `umoci unpack failed: ${u.all}`);
    return { dir, config: await readFile(join(dir, 'config.json'), 'utf8') };
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
}

/** Runs `step` in `bundle` and repacks what it changed as the layer `tag`; the bundle is then that layer's. */
async function layerOf(bundle: Bundle, step: BuildStep, tag: string, options: BuildOptions, umoci: string): Promise<void> {
  let stage: string | undefined;
  if (step.stage) {
    stage = `${bundle.dir}-stage`;
    await mkdir(stage, { recursive: true });
  }
  try {
    if (step.stage && stage)
      await step.stage(stage).catch((e: Error) => {
        throw new ImageError(options.target, `step ${step.name} failed: ${e.message}`);
      });
    await runStep(options.target, bundle, step, options, stage);
  } finally {
    if (stage) await rm(stage, { recursive: true, force: true });
  }
  const p = await execa(
    umoci,
    ['repack', '--refresh-bundle', '--image', `${options.layout}:${tag}`, '--history.created_by', `${step.name}: ${step.run}`, bundle.dir],
    { reject: false, all: true },
  );
  if (p.exitCode !== 0) throw new ImageError(options.target, `umoci repack failed: ${p.all}`);
}

/**
 * Builds `build` on `options.base`, one layer per step, and pushes it to `options.target`. A
 * step whose key (hash of its parent's manifest digest and the step) is in the layout already is
 * not run: an unchanged spec runs nothing, a changed step rebuilds from there on. A failed step
 * leaves no tag behind, so nothing half-built is ever used or pushed. Concurrent builds on one
 * layout run one after the other, so identical ones build once.
 */
export async function buildImage(build: ImageBuild, options: BuildOptions): Promise<BuildResult> {
  const say = options.onLog ?? (() => undefined);
  const onStep = options.onStep ?? ((p: BuildProgress) => say(progressLine(p)));
  return withLayoutLock(options.layout, say, () => buildLocked(build, options, say, onStep));
}

async function buildLocked(
  build: ImageBuild,
  options: BuildOptions,
  say: (line: string) => void,
  onStep: (p: BuildProgress) => void,
): Promise<BuildResult> {
  const umoci = options.umoci ?? 'umoci';
  await mkdir(options.workDir, { recursive: true });
  const baseTag = `base-${createHash('sha256').update(options.base).digest('hex').slice(0, 32)}`;
  say(`base: ${options.base}`);
  // gzip in the builder's layout whatever the base's layers are: umoci unpacks each step's parent.
  await skopeoCopy(options.base, `docker://${options.base}`, `oci:${options.layout}:${baseTag}`, options.access, {
    onProgress: (l) => say(`  ${l}`),
    compress: 'gzip',
  });
  let parent = (await manifestDigest(options.layout, baseTag))!;
  let parentTag = baseTag;
  const steps: BuildResult['steps'] = [];
  const all = buildSteps(build);
  // Unpacked once for the first step that runs: each repack refreshes the bundle to the layer it
  // wrote, so the next step runs on it as it is (an unpack costs seconds per hundred MiB).
  let bundle: Bundle | undefined;
  try {
    for (const [i, step] of all.entries()) {
      const key = layerKey(parent, step);
      const tag = `layer-${key}`;
      const cached = await manifestDigest(options.layout, tag);
      onStep({ index: i + 1, total: all.length, name: step.name, summary: step.summary, cached: Boolean(cached) });
      if (cached) {
        // A bundle left from an earlier step is not this layer's parent any more.
        if (bundle) await rm(bundle.dir, { recursive: true, force: true });
        bundle = undefined;
      } else {
        bundle ??= await unpackBundle(options, umoci, parentTag);
        await layerOf(bundle, step, tag, options, umoci);
      }
      steps.push({ name: step.name, cached: Boolean(cached), key });
      parent = (await manifestDigest(options.layout, tag))!;
      parentTag = tag;
    }
  } finally {
    if (bundle) await rm(bundle.dir, { recursive: true, force: true });
  }
  // env and workdir: a config-only change on top of the last layer, under a tag of its own.
  const env = { ...(build.npm?.length ? { NODE_PATH: NPM_MODULES } : {}), ...(build.env ?? {}) };
  const finalTag = `final-${createHash('sha256')
    .update(`${parent}\n${JSON.stringify({ env, workdir: build.workdir ?? null })}`)
    .digest('hex')}`;
  if (!(await manifestDigest(options.layout, finalTag))) {
    const args = ['config', '--image', `${options.layout}:${parentTag}`, '--tag', finalTag];
    for (const [k, v] of Object.entries(env)) args.push('--config.env', `${k}=${v}`);
    if (build.workdir) args.push('--config.workingdir', build.workdir);
    const c = await execa(umoci, args, { reject: false, all: true });
    if (c.exitCode !== 0) throw new ImageError(options.target, `umoci config failed: ${c.all}`);
  }
  say(`pushing ${options.target}`);
  // zstd in the registry: agents unpack it as it downloads, several times faster than gzip. The
  // steps' layers are compressed once per layout (withZstdLayers); a layer of the base the
  // registry holds already is mounted as it is (skopeo 1.9 reuses before it recompresses), and
  // one it does not is recompressed by skopeo.
  const baseLayers = await layerCount(options.layout, baseTag);
  const pushFrom = await withZstdLayers(options.layout, finalTag, baseLayers);
  const digest = await skopeoCopy(options.target, pushFrom, `docker://${options.target}`, options.access, {
    onProgress: (l) => say(`  ${l}`),
    compress: 'zstd',
  });
  return { digest, steps };
}
