import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { ImageError } from '../errors.js';
import type { UserNamespaceMapping } from '../oci/config-builder.js';
import { type RegistryAccessList, skopeoCopy } from './skopeo.js';

export interface SnapshotImageOptions {
  /** The registry image the layer goes on (`host/repo@sha256:…`). */
  base: string;
  /** Where the result is pushed (`host/repo:tag`). */
  target: string;
  access: RegistryAccessList;
  /** The directory on this machine that becomes `path` in the image. */
  source: string;
  /** Its absolute path in the image; whatever the base held there is masked (an opaque directory). */
  path: string;
  /** Scratch space: a layout per snapshot, removed after the push. */
  workDir: string;
  /** The containers' user namespace: the files' host owners are written as the container saw them. */
  userNamespace?: UserNamespaceMapping;
  /** The layer's history entry (`tern sandbox snapshot sb-…`). */
  createdBy: string;
  umoci?: string;
}

/**
 * `base` with one more layer holding `source` at `path`, pushed to `target`; resolves the pushed
 * manifest's digest. The base's layers are copied by digest and pushed again only where the
 * target's registry lacks them (the same registry: none), so a snapshot costs its own layer.
 */
export async function snapshotImage(options: SnapshotImageOptions): Promise<string> {
  const layout = join(options.workDir, `snapshot-${randomBytes(6).toString('hex')}`);
  await mkdir(options.workDir, { recursive: true });
  try {
    await skopeoCopy(options.base, `docker://${options.base}`, `oci:${layout}:base`, options.access);
    const map = options.userNamespace;
    const idMaps = map ? ['--uid-map', `0:${map.hostId}:${map.size}`, '--gid-map', `0:${map.hostId}:${map.size}`] : [];
    const insert = await execa(
      options.umoci ?? 'umoci',
      [
        'insert',
        '--image',
        `${layout}:base`,
        '--tag',
        'snapshot',
        '--opaque',
        ...idMaps,
        '--history.created_by',
        options.createdBy,
        options.source,
        options.path,
      ],
      { reject: false, all: true },
    );
    if (insert.exitCode !== 0) throw new ImageError(options.target, `umoci insert failed: ${insert.all}`);
    return await skopeoCopy(options.target, `oci:${layout}:snapshot`, `docker://${options.target}`, options.access);
  } finally {
    await rm(layout, { recursive: true, force: true });
  }
}
