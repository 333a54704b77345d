import { type DeploymentRecord, type DeploymentSpec, resolveSpec } from '#tern/contracts';

/**
 * A deployment version as the `deployments` KV holds it (what RoutesMirror answers), its spec
 * resolved from `spec` as a deploy resolves it, so defaults (task policy, limits) are the real ones.
 */
export function deploymentRecord(
  spec: Partial<DeploymentSpec> & Pick<DeploymentSpec, 'name' | 'kind'>,
  over: Partial<DeploymentRecord> = {},
): DeploymentRecord {
  const resolved = resolveSpec({
    image: 'python:3.12-slim',
    command: ['python', '-m', 'http.server'],
    ...spec,
  } as DeploymentSpec);
  return {
    deploymentId: `d-${spec.name}`,
    workspaceId: 'w1',
    name: spec.name,
    version: 1,
    latest: true,
    state: 'active',
    spec: resolved,
    updatedAt: new Date(0).toISOString(),
    ...over,
  };
}
