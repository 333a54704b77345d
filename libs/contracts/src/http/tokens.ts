/** An API token as `GET /api/v1/tokens` lists it: never the secret. */
export interface TokenView {
  id: string;
  name: string;
  prefix: string;
  role: 'operator' | 'admin' | 'member';
  createdAt: string;
  lastUsedAt: string | null;
  /** When the token stops working; null: it lives until revoked. */
  expiresAt: string | null;
}

/** `POST /api/v1/tokens`: the secret, shown once. */
export interface CreatedToken extends TokenView {
  token: string;
}

/** `POST /api/v1/tokens` (admin). */
export interface CreateTokenRequest {
  /** A label to tell tokens apart. */
  name: string;
  /** Default: member. */
  role?: 'operator' | 'admin' | 'member';
  /** When the token stops working (ISO 8601, in the future); default: never. */
  expiresAt?: string;
}

/** `DELETE /api/v1/workspaces/:id` (operator): what went with the workspace. Its usage is kept. */
export interface WorkspaceDeleted {
  id: string;
  name: string;
  revokedTokens: number;
  revokedNatsUsers: number;
  /** Deleted as `DELETE /api/v1/deployments/:name` does: containers wind down, unfinished tasks cancelled. */
  deletedDeployments: number;
  terminatedSandboxes: number;
  destroyedSecrets: number;
  deletedVolumes: number;
  /** Manifests deleted from the workspace's build repositories in Tern's registry. */
  deletedImages: number;
  /** Steps that failed on one object (NATS or the registry unreachable), each naming it; the rest ran. */
  problems: string[];
}

/** `DELETE /api/v1/images?ref=`: the manifest deleted, with every tag that named it. */
export interface DeletedImage {
  image: string;
  digest: string;
}
