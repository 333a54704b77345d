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
