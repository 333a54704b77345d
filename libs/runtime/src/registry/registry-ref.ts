import { registryRefProblem } from '#tern/contracts';
import { ImageError } from '../errors.js';

/** A reference to an image in an OCI distribution registry: `registry.example.com:5000/team/model:1.2[@sha256:…]`. */
export interface RegistryRef {
  /** `host[:port]` of the registry. */
  registry: string;
  /** `team/model`: lower-case path components. */
  repository: string;
  tag?: string;
  /** `sha256:<64 hex>` when the reference pins the image. */
  digest?: string;
}

/** Parses a registry reference (grammar: registryRefProblem); an ImageError saying what is wrong otherwise. */
export function parseRegistryRef(ref: string): RegistryRef {
  const problem = registryRefProblem(ref);
  if (problem) throw new ImageError(ref, problem);
  const at = ref.indexOf('@');
  const named = at >= 0 ? ref.slice(0, at) : ref;
  const slash = named.indexOf('/');
  const rest = named.slice(slash + 1);
  const colon = rest.lastIndexOf(':');
  return {
    registry: named.slice(0, slash),
    repository: colon >= 0 ? rest.slice(0, colon) : rest,
    ...(colon >= 0 ? { tag: rest.slice(colon + 1) } : {}),
    ...(at >= 0 ? { digest: ref.slice(at + 1) } : {}),
  };
}

/** `registry/repository@digest`: the one form an agent pulls. */
export function pinnedRef(ref: RegistryRef, digest: string): string {
  return `${ref.registry}/${ref.repository}@${digest}`;
}
