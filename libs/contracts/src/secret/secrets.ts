/** A workspace secret's name (`tern secret set NAME`, a spec's `registry_secret:`). */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,62}$/;
export const SECRET_NAME_RULE = 'letters, digits, _ . or -, starting with a letter or _, at most 63 characters';
/** A secret a spec's `secrets:` sets as an environment variable of its own name: letters, digits and _ only. */
export const SECRET_ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** What the API says about a secret: never its value. */
export interface SecretSummary {
  name: string;
  /** The value's length. */
  bytes: number;
  createdAt: string;
  updatedAt: string;
}
