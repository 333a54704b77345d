import type { DeploymentSpec, ResolvedSpec } from '#tern/contracts';
import type { DeploymentVersion } from '#tern/persistence';

/**
 * deployment_versions.spec holds the resolved spec (what services act on, so a reader of the
 * row needs no defaults of its own) plus, under `submitted`, the spec as the user wrote it
 * (for `tern deployments <name>` and for redeploying it unchanged).
 */
export type StoredSpec = ResolvedSpec & { submitted: DeploymentSpec };

export function storedSpec(resolved: ResolvedSpec, submitted: DeploymentSpec): StoredSpec {
  return { ...resolved, submitted: { ...submitted } };
}

export function resolvedOf(v: DeploymentVersion): ResolvedSpec {
  const { submitted: _submitted, ...resolved } = v.spec as unknown as StoredSpec;
  return resolved;
}

export function submittedOf(v: DeploymentVersion): DeploymentSpec | undefined {
  return (v.spec as unknown as StoredSpec).submitted;
}
