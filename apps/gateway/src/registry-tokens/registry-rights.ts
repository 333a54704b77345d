import { type RegistryRights } from './registry-token.js';

/** Where builds are pushed (`builds/<workspace id>/<name>`): builders write there. */
export const BUILD_REPOSITORIES = /^builds\//;

/** A workspace's own builds: only its members (and the builders) read and write them. */
export function workspaceBuilds(workspaceId: string): string {
  return `builds/${workspaceId}/`;
}
/** Tern's base images (`tern image base`): every workspace builds on them. */
export const BASE_REPOSITORIES = /^tern\//;

/** Who asks for a registry token, as the gateway identified them. */
export type RegistryPrincipal =
  /** An operator API token: the platform's own images, every repository. */
  | { kind: 'operator' }
  /** A workspace's API token: its own builds, and Tern's base images. */
  | { kind: 'workspace'; workspaceId: string }
  /**
   * A machine with its machine token: a stranger's computer. It pulls the images of the
   * containers placed on it (`placed`), nothing else; a machine of a builder pool also pushes builds.
   */
  | { kind: 'machine'; builder: boolean; placed: (repository: string) => Promise<boolean> };

/** What each kind of principal may do with the registry. */
export function registryRights(principal: RegistryPrincipal): RegistryRights {
  switch (principal.kind) {
    case 'operator':
      return { pull: () => true, push: () => true, catalog: true };
    case 'workspace': {
      const own = workspaceBuilds(principal.workspaceId);
      return { pull: (repo) => repo.startsWith(own) || BASE_REPOSITORIES.test(repo), push: (repo) => repo.startsWith(own), catalog: false };
    }
    case 'machine':
      return principal.builder
        ? { pull: () => true, push: (repo) => BUILD_REPOSITORIES.test(repo), catalog: false }
        : { pull: (repo) => principal.placed(repo), push: () => false, catalog: false };
  }
}
