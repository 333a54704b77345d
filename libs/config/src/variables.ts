/**
 * Every environment variable Tern reads, with its default: VARIABLES, gathered from the groups
 * under variables/. This is the one place to look: docs/configuration.md's tables are rendered
 * from it, and docker-compose.yml and k8s/ are checked against it, by tests
 * (scripts/configuration-doc.spec.ts, scripts/manifests.spec.ts).
 */
import type { ServiceName, VariableSpec } from './variable-spec.js';
import { AGENT_VARIABLES } from './variables/agent.js';
import { CONNECTION_VARIABLES } from './variables/connections.js';
import { CONTROL_PLANE_VARIABLES } from './variables/control-plane.js';

export * from './variable-spec.js';

/** Every variable, in the order the README's table lists them; each group in its own file under variables/. */
export const VARIABLES = [
  ...CONNECTION_VARIABLES,
  ...CONTROL_PLANE_VARIABLES,
  ...AGENT_VARIABLES,
] as const satisfies readonly VariableSpec[];

export type VariableName = (typeof VARIABLES)[number]['name'];

export function variablesFor(service: ServiceName): readonly VariableSpec[] {
  return VARIABLES.filter((v: VariableSpec) => v.services === 'all' || v.services.includes(service));
}
