import type { IntegratorScope } from '../permissions.js';

/** An integrator's NATS user as `GET /api/v1/nats/users` lists it. */
export interface NatsUserView {
  id: string;
  name: string;
  workspaceId: string;
  /** What it may do: hear the workspace's task events, submit its tasks. */
  scopes: IntegratorScope[];
  /** The key its JWT was signed for; the seed never reached the gateway. */
  publicKey: string;
  createdAt: string;
  /** When it was revoked (on the account's revocation list since); null: active. */
  revokedAt: string | null;
}

/** `POST /api/v1/nats/users` (operator, or the workspace's admin). */
export interface CreateNatsUserRequest {
  /** A label: letters, digits, `-` or `_`. */
  name: string;
  /** The workspace it acts for; default: the caller's. Only an operator names another. */
  workspace?: string;
  allow: IntegratorScope[];
  /** The user public key (U…) of the key pair the caller made; its seed stays with the caller. */
  publicKey: string;
}

/** `POST /api/v1/nats/users`: the user JWT and how to connect with it. */
export interface CreatedNatsUser extends NatsUserView {
  jwt: string;
  /** NATS URLs to connect to, as machines are given them. */
  servers: string[];
  /** The installation's subject root (NATS_NAMESPACE). */
  namespace: string;
  /** The client's inboxPrefix: replies to its requests come only there. */
  inboxPrefix: string;
}
