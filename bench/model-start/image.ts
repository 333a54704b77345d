import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { buildBaseImage, type RegistryAccess, skopeoCopy } from '#tern/runtime';

/** Where the image's library files are (the handler checks they are there). */
export const LIBRARY_DIR = '/opt/bench-libs';

export interface BenchImage {
  /** `host/tern/bench-model@sha256:…`, what the deployments name. */
  ref: string;
  repository: string;
  /** Every layer's digest (hex), size and media type in the registry, the base's included (gzip: pushed as its image holds it). */
  layers: { hex: string; size: number; mediaType: string }[];
}

/**
 * Tern's base (debootstrap minbase + python3, kept in `cacheDir` between runs) with `mib` MiB of
 * random, incompressible library files on top, one file and one layer per at most 128 MiB (at
 * least four, so a pull has several layers to fetch at once), pushed zstd-compressed (as builds
 * push theirs; the base's layer, which the registry holds already, stays gzip) to the stack's
 * registry as `tern/bench-model` with the operator's credentials.
 */
export async function pushBenchImage(access: RegistryAccess, mib: number, cacheDir: string, work: string): Promise<BenchImage> {
  const repository = 'tern/bench-model';
  const base = `${access.host}/tern/base:bench-model`;
  await buildBaseImage(base, [access], { cacheDir, include: ['python3'] });
  const layout = join(work, 'image-layout');
  await skopeoCopy(base, `docker://${base}`, `oci:${layout}:model`, [access]);
  const files = Math.max(4, Math.ceil(mib / 128));
  const fill = join(work, 'image-fill');
  for (let i = 0; i < files; i++) {
    const bytes = Math.floor((mib * 2 ** 20) / files);
    await rm(fill, { recursive: true, force: true });
    await mkdir(fill);
    await writeFile(join(fill, `lib${i}.so`), randomBytes(bytes));
    await execa('umoci', ['insert', '--image', `${layout}:model`, join(fill, `lib${i}.so`), `${LIBRARY_DIR}/lib${i}.so`]);
  }
  await rm(fill, { recursive: true, force: true });
  const target = `${access.host}/${repository}:bench`;
  const digest = await skopeoCopy(target, `oci:${layout}:model`, `docker://${target}`, [access], { compress: 'zstd' });
  await rm(layout, { recursive: true, force: true });
  const raw = await execa('skopeo', [
    'inspect',
    '--raw',
    '--tls-verify=false',
    '--creds',
    `${access.username}:${access.password}`,
    `docker://${access.host}/${repository}@${digest}`,
  ]);
  const manifest = JSON.parse(raw.stdout) as { layers: { digest: string; size: number; mediaType: string }[] };
  return {
    ref: `${access.host}/${repository}@${digest}`,
    repository,
    layers: manifest.layers.map((l) => ({ hex: l.digest.replace(/^sha256:/, ''), size: l.size, mediaType: l.mediaType })),
  };
}
