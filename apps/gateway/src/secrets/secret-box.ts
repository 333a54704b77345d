import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Seals workspace secrets at rest: AES-256-GCM under the gateway's SECRETS_KEY, with the
 * workspace and the name as associated data, so a sealed value copied to another workspace's
 * row (or another name) does not open. Format: `v1.<iv>.<tag>.<ciphertext>` (base64url).
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(keyBase64: string) {
    this.key = Buffer.from(keyBase64, 'base64');
    if (this.key.length !== 32)
      throw new Error(`SECRETS_KEY must be 32 bytes in base64 (openssl rand -base64 32), not ${this.key.length} bytes`);
  }

  seal(workspaceId: string, name: string, value: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(aad(workspaceId, name));
    const ciphertext = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    return ['v1', iv, cipher.getAuthTag(), ciphertext].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
  }

  /** The value; throws when the sealed text was made under another key, workspace or name. */
  open(workspaceId: string, name: string, sealed: string): string {
    const [version, iv, tag, ciphertext] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || ciphertext === undefined) throw new Error(`secret "${name}" is not sealed in a known format`);
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(aad(workspaceId, name));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  }
}

function aad(workspaceId: string, name: string): Buffer {
  return Buffer.from(`${workspaceId}\0${name}`);
}
