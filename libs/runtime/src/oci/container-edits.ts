import type { OciDevice, OciHook, OciHooks, OciMount, OciSpec } from './oci-spec.js';

/**
 * Additions to a container's config, in the shape of a CDI spec's containerEdits once resolved
 * (device numbers known). GPU injection produces one, from a CDI spec or from the NVIDIA
 * devices and libraries found on the host; the config builder applies it.
 */
export interface ContainerEdits {
  /** `KEY=value`; PATH and LD_LIBRARY_PATH are prepended to what the image sets, the rest replace. */
  env?: string[];
  devices?: OciDevice[];
  mounts?: OciMount[];
  hooks?: Partial<Record<keyof OciHooks, OciHook[]>>;
}

const PATH_LISTS = new Set(['PATH', 'LD_LIBRARY_PATH']);

export function mergeEdits(...all: (ContainerEdits | undefined)[]): ContainerEdits {
  const out: Required<ContainerEdits> = { env: [], devices: [], mounts: [], hooks: {} };
  for (const e of all) {
    if (!e) continue;
    out.env.push(...(e.env ?? []));
    for (const d of e.devices ?? []) if (!out.devices.some((x) => x.path === d.path)) out.devices.push(d);
    for (const m of e.mounts ?? []) if (!out.mounts.some((x) => x.destination === m.destination)) out.mounts.push(m);
    for (const [k, hooks] of Object.entries(e.hooks ?? {})) {
      const key = k as keyof OciHooks;
      (out.hooks[key] ??= []).push(...(hooks ?? []));
    }
  }
  return out;
}

/** Sets `KEY=value` in an env list, prepending for PATH-like variables. */
export function setEnv(env: string[], entry: string, prependPathLists = true): string[] {
  const eq = entry.indexOf('=');
  const key = entry.slice(0, eq);
  const value = entry.slice(eq + 1);
  const i = env.findIndex((e) => e.startsWith(`${key}=`));
  if (i < 0) return [...env, entry];
  const next = [...env];
  if (prependPathLists && PATH_LISTS.has(key)) {
    const old = env[i]!.slice(key.length + 1);
    const parts = [...value.split(':'), ...old.split(':')].filter((p, j, a) => p && a.indexOf(p) === j);
    next[i] = `${key}=${parts.join(':')}`;
  } else next[i] = entry;
  return next;
}

export function applyEdits(config: OciSpec, edits: ContainerEdits): OciSpec {
  let env = config.process.env;
  for (const e of edits.env ?? []) env = setEnv(env, e);
  const devices = [...(config.linux.devices ?? [])];
  const rules = [...config.linux.resources.devices];
  for (const d of edits.devices ?? []) {
    if (devices.some((x) => x.path === d.path)) continue;
    devices.push(d);
    if (d.type === 'c' || d.type === 'b') rules.push({ allow: true, type: d.type, major: d.major, minor: d.minor, access: 'rwm' });
  }
  const hooks: OciHooks = { ...(config.hooks ?? {}) };
  for (const [k, list] of Object.entries(edits.hooks ?? {})) {
    const key = k as keyof OciHooks;
    hooks[key] = [...(hooks[key] ?? []), ...(list ?? [])];
  }
  return {
    ...config,
    process: { ...config.process, env },
    mounts: [...config.mounts, ...(edits.mounts ?? [])],
    ...(Object.keys(hooks).length ? { hooks } : {}),
    linux: {
      ...config.linux,
      ...(devices.length ? { devices } : {}),
      resources: { ...config.linux.resources, devices: rules },
    },
  };
}
