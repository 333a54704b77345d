import { createAccount, createUser, fromPublic } from '@nats-io/nkeys';
import { nativeKeyPair } from './native-keys.js';

describe('nativeKeyPair', () => {
  it('is the nkeys key pair of the same seed, signing what nkeys verifies (and refusing what it did not sign)', () => {
    for (const nkey of [createUser(), createAccount()]) {
      const native = nativeKeyPair(new TextDecoder().decode(nkey.getSeed()));
      const data = new TextEncoder().encode('a nonce from the server');
      expect(native.getPublicKey()).toBe(nkey.getPublicKey());
      expect(native.getPrivateKey()).toEqual(nkey.getPrivateKey());
      expect(new TextDecoder().decode(native.getSeed())).toBe(new TextDecoder().decode(nkey.getSeed()));
      const signature = native.sign(data);
      expect(Buffer.from(signature)).toEqual(Buffer.from(nkey.sign(data)));
      expect(fromPublic(nkey.getPublicKey()).verify(data, signature)).toBe(true);
      expect(native.verify(data, nkey.sign(data))).toBe(true);
      expect(native.verify(new TextEncoder().encode('something else'), signature)).toBe(false);
    }
  });
});
