/**
 * Volumes: named, workspace-scoped file trees stored content-addressed. A volume's state is its
 * manifest (path → chunk digests, size, mode, mtime) in Postgres; the chunks are blobs of the
 * volume's repository in the registry (`volumes/<workspace id>/<volume id>`), or, where no registry
 * is configured, objects of the `volume-chunks` store, stored once per workspace.
 */

/** Files are cut into chunks of this size (the last one shorter); a chunk is named by its sha256. */
export const VOLUME_CHUNK_BYTES = 4 * 1024 * 1024;

/** A volume's name, as a spec's `volumes[].name` writes it. */
export const VOLUME_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const VOLUME_NAME_RULE = 'lower-case letters, digits or -, starting with a letter or digit, at most 63 characters';

/** `<prefix>/<containerId>/volumes/<name>/…`: the volumes of a container placed on the calling machine. */
export const AGENT_CONTAINERS_PATH = '/api/v1/agent/containers';

/** `GET …/manifest`, `GET …/grant`, `GET|PUT …/chunks/<hex>`, `POST …/commit` of one volume mounted by a container. */
export function agentVolumePath(containerId: string, volume: string): string {
  return `${AGENT_CONTAINERS_PATH}/${encodeURIComponent(containerId)}/volumes/${encodeURIComponent(volume)}`;
}

/** `GET …`: the secrets of a container placed on the calling machine, as environment variables, while it starts (AgentContainerSecrets). */
export function agentSecretsPath(containerId: string): string {
  return `${AGENT_CONTAINERS_PATH}/${encodeURIComponent(containerId)}/secrets`;
}

/** The answer of agentSecretsPath: name → value, for the container's environment only. */
export interface AgentContainerSecrets {
  env: Record<string, string>;
}

/** One file of a volume's manifest. */
export interface VolumeFileEntry {
  /** Relative to the volume's root, `/`-separated, no `.` or `..` segment. */
  readonly path: string;
  readonly size: number;
  /** Permission bits (0o644, 0o755, …). */
  readonly mode: number;
  /** ISO 8601. */
  readonly mtime: string;
  /** sha256 hex of each chunk, in order; none for an empty file. */
  readonly chunks: readonly string[];
}

/** A volume's committed state: what a mount materializes. */
export interface VolumeManifest {
  readonly volume: string;
  /** Bumped by every commit, put and rm; a commit names the version it started from. */
  readonly version: number;
  readonly files: readonly VolumeFileEntry[];
  /**
   * Where the chunks live: `registry`, blobs of the volume's repository in the registry, fetched
   * and pushed with the token of `GET …/grant`; absent, the gateway serves them (`…/chunks/<hex>`)
   * from its NATS object store (an installation without a registry).
   */
  readonly store?: 'registry';
}

/**
 * `GET …/grant`: a short-lived registry token for the volume's repository (pull, and push for a
 * read-write mount), for a container placed on the calling machine.
 */
export interface VolumeBlobGrant {
  /** `http(s)://host[:port]` of the registry. */
  readonly url: string;
  /** `volumes/<workspace id>/<volume id>` */
  readonly repository: string;
  readonly token: string;
  readonly expiresIn: number;
}

/** What a commit changed, and which of those files someone else had changed since its base. */
export interface VolumeCommitResult {
  readonly version: number;
  readonly written: number;
  readonly removed: number;
  /** Files this commit overwrote (or removed) that another commit or put changed after its base version. */
  readonly overwritten: readonly string[];
}
