import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { ImageError } from '../errors.js';

/** How to reach one registry: its host, whether it speaks plain HTTP (a loopback dev registry), who we are to it. */
export interface RegistryAccess {
  /** `host[:port]`, as references name it. */
  host: string;
  /** Plain HTTP (or TLS with a certificate we cannot check): only for a registry on loopback. */
  insecure?: boolean;
  username?: string;
  password?: string;
  /** A registry bearer token already in hand (the gateway signs its own), instead of a user. */
  token?: string;
  /**
   * The site cache in front of this registry (`tern-agent site-cache`): an agent's pulls read
   * their blobs through it with the same token, and from the registry itself when it cannot be
   * reached (`unreachable` hears why). skopeo ignores it.
   */
  siteCache?: { url: string; unreachable?: (message: string) => void };
}

/** Registry access by host; a host not listed is reached anonymously over verified TLS. */
export type RegistryAccessList = readonly RegistryAccess[];

export interface SkopeoOptions {
  skopeo?: string;
  /** Called with each line skopeo prints (`Copying blob sha256:… done`): pull and push progress. */
  onProgress?: (line: string) => void;
  /**
   * Layers written in this compression (`--dest-compress-format`; a layer compressed otherwise is
   * recompressed): `zstd` for what agents pull (it decompresses several times faster than gzip),
   * `gzip` for a layout umoci must read (umoci 0.4 reads no zstd).
   */
  compress?: 'gzip' | 'zstd';
}

function accessFor(list: RegistryAccessList, host: string): RegistryAccess | undefined {
  return list.find((a) => a.host === host);
}

/** skopeo's flags for one side (`src` or `dest`) of a transfer with a registry. */
function sideFlags(side: 'src' | 'dest', access: RegistryAccess | undefined): string[] {
  const flags = [`--${side}-tls-verify=${access?.insecure ? 'false' : 'true'}`];
  if (access?.token) flags.push(`--${side}-registry-token`, access.token);
  else if (access?.username) flags.push(`--${side}-creds`, `${access.username}:${access.password ?? ''}`);
  else flags.push(`--${side}-no-creds`);
  return flags;
}

function hostOf(ref: string): string {
  return ref.slice(0, ref.indexOf('/'));
}

/** The last lines skopeo wrote, without credentials it may echo back. */
function why(r: { stderr?: unknown; stdout?: unknown; shortMessage?: string }, access: RegistryAccess | undefined): string {
  let text = String(r.stderr || r.stdout || r.shortMessage || '').trim();
  for (const secret of [access?.password, access?.token]) if (secret) text = text.split(secret).join('***');
  // skopeo logs `time="…" level=fatal msg="…"`: the message is what says why.
  const lines = text.split('\n').map((l) => /level=\w+ msg="(.*)"\s*$/.exec(l)?.[1]?.replace(/\\"/g, '"') ?? l);
  return lines.slice(-4).join('\n');
}

/**
 * Copies an image between transports (`docker://host/repo@sha256:…`, `oci:<layout>:<tag>`).
 * skopeo checks every blob against its digest as it reads it: a tampered blob fails the copy.
 * Resolves the digest of the manifest it wrote.
 */
export async function skopeoCopy(
  image: string,
  from: string,
  to: string,
  access: RegistryAccessList,
  options: SkopeoOptions = {},
): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'tern-skopeo-'));
  try {
    const srcAccess = from.startsWith('docker://') ? accessFor(access, hostOf(from.slice('docker://'.length))) : undefined;
    const destAccess = to.startsWith('docker://') ? accessFor(access, hostOf(to.slice('docker://'.length))) : undefined;
    const args = ['copy', '--retry-times', '2', '--digestfile', join(dir, 'digest')];
    if (from.startsWith('docker://')) args.push(...sideFlags('src', srcAccess));
    if (to.startsWith('docker://')) args.push(...sideFlags('dest', destAccess));
    if (options.compress) args.push('--dest-compress-format', options.compress);
    args.push(from, to);
    const child = execa(options.skopeo ?? 'skopeo', args, { reject: false, all: false });
    child.stdout?.setEncoding('utf8');
    let partial = '';
    child.stdout?.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const l of lines) if (l.trim()) options.onProgress?.(l.trim());
    });
    const r = await child;
    if (r.exitCode !== 0) throw new ImageError(image, `copy ${from} → ${to} failed: ${why(r, srcAccess ?? destAccess)}`);
    return (await readFile(join(dir, 'digest'), 'utf8')).trim();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The manifest digest a tag points at now (`skopeo inspect`), for pinning a deployment to it. */
export async function resolveRegistryDigest(image: string, access: RegistryAccessList, options: SkopeoOptions = {}): Promise<string> {
  const acc = accessFor(access, hostOf(image));
  const args = ['inspect', '--retry-times', '1', '--format', '{{.Digest}}', `--tls-verify=${acc?.insecure ? 'false' : 'true'}`];
  if (acc?.token) args.push('--registry-token', acc.token);
  else if (acc?.username) args.push('--creds', `${acc.username}:${acc.password ?? ''}`);
  else args.push('--no-creds');
  const r = await execa(options.skopeo ?? 'skopeo', [...args, `docker://${image}`], { reject: false });
  if (r.exitCode !== 0) throw new ImageError(image, `cannot resolve in its registry: ${why(r, acc)}`);
  return r.stdout.trim();
}
