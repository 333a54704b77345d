import { randomBytes } from 'node:crypto';
import { SecretBox } from './secret-box.js';

const box = new SecretBox(randomBytes(32).toString('base64'));

describe('SecretBox', () => {
  it('opens what it sealed, and never stores the value in clear', () => {
    const sealed = box.seal('ws-1', 'registry', 'builder:hunter2');
    expect(sealed).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(sealed).not.toContain('hunter2');
    expect(box.open('ws-1', 'registry', sealed)).toBe('builder:hunter2');
    expect(box.seal('ws-1', 'registry', 'builder:hunter2')).not.toBe(sealed); // a fresh IV each time
  });

  it('refuses a sealed value moved to another workspace or name, tampered, or sealed under another key', () => {
    const sealed = box.seal('ws-1', 'registry', 'builder:hunter2');
    expect(() => box.open('ws-2', 'registry', sealed)).toThrow();
    expect(() => box.open('ws-1', 'other', sealed)).toThrow();
    const parts = sealed.split('.');
    // One bit of the ciphertext flipped (a byte set to a fixed value was no change when it had that value already, 1 run in 256).
    const ciphertext = Buffer.from(parts[3]!, 'base64url');
    ciphertext[0] ^= 1;
    parts[3] = ciphertext.toString('base64url');
    expect(() => box.open('ws-1', 'registry', parts.join('.'))).toThrow();
    expect(() => new SecretBox(randomBytes(32).toString('base64')).open('ws-1', 'registry', sealed)).toThrow();
    expect(() => box.open('ws-1', 'registry', 'plain')).toThrow('secret "registry" is not sealed in a known format');
  });

  it('wants a 32-byte key', () => {
    expect(() => new SecretBox(randomBytes(16).toString('base64'))).toThrow(
      'SECRETS_KEY must be 32 bytes in base64 (openssl rand -base64 32), not 16 bytes',
    );
  });
});
