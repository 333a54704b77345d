import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import { fromSeed, type KeyPair } from '@nats-io/nkeys';

/** PKCS#8 DER of an Ed25519 private key, before its 32-byte seed (RFC 8410). */
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
/** Derived with nkeys' pure-JS Ed25519, once per seed and process. */
const derived = new Map<string, { publicKey: string; privateKey: Uint8Array }>();

/**
 * An nkey whose signatures come from Node's own Ed25519 (OpenSSL), about a hundred times faster
 * than the pure-JS one of nkeys, which derives the key pair again for every signature: issuing a
 * machine's user JWT at registration, and a simulated fleet's connects (bench/agents), sign
 * thousands of times. Its public and private keys (which @nats-io/jwt asks for before each
 * signature) are derived once per seed and process. Everything else is the nkeys key pair's.
 */
export function nativeKeyPair(seed: string): KeyPair {
  const nkey = fromSeed(new TextEncoder().encode(seed));
  const raw = (nkey as KeyPair & { getRawSeed(): Uint8Array }).getRawSeed();
  const key: KeyObject = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, raw]), format: 'der', type: 'pkcs8' });
  const keys = () => {
    let d = derived.get(seed);
    if (!d) derived.set(seed, (d = { publicKey: nkey.getPublicKey(), privateKey: nkey.getPrivateKey() }));
    return d;
  };
  return Object.assign(Object.create(nkey) as KeyPair, {
    getPublicKey: () => keys().publicKey,
    getPrivateKey: () => keys().privateKey,
    sign(input: Uint8Array): Uint8Array {
      return new Uint8Array(sign(null, input, key));
    },
    verify(input: Uint8Array, signature: Uint8Array): boolean {
      return verify(null, input, createPublicKey(key), signature);
    },
  });
}
