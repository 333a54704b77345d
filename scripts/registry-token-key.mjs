#!/usr/bin/env node
// The registry's token key pair for installations `npm run up` does not make (docker-compose,
// Kubernetes): `node scripts/registry-token-key.mjs <key dir> <cert dir> [--owner uid:gid]`
// writes <key dir>/token-key.pem (the gateway's REGISTRY_TOKEN_KEY_FILE, mode 600) and
// <cert dir>/token-cert.pem (the registry's REGISTRY_AUTH_TOKEN_ROOTCERTBUNDLE) once; a later run
// keeps them. Two dirs, so the registry never mounts the key.
import { chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTokenKey } from './lib/registry.mjs';

const args = process.argv.slice(2);
const ownerAt = args.indexOf('--owner');
const owner = ownerAt >= 0 ? args.splice(ownerAt, 2)[1] : undefined;
const [keyDir, certDir] = args;
if (!keyDir || !certDir || (owner !== undefined && !/^\d+:\d+$/.test(owner))) {
  console.error('usage: node scripts/registry-token-key.mjs <key dir> <cert dir> [--owner uid:gid]');
  process.exit(2);
}
const keyFile = join(keyDir, 'token-key.pem');
const certFile = join(certDir, 'token-cert.pem');
if (existsSync(keyFile) && existsSync(certFile)) {
  console.log(`kept ${keyFile} and ${certFile}`);
} else {
  const work = mkdtempSync(join(tmpdir(), 'tern-registry-key-'));
  try {
    makeTokenKey(join(work, 'token-key.pem'), join(work, 'token-cert.pem'));
    for (const dir of [keyDir, certDir]) mkdirSync(dir, { recursive: true });
    copyFileSync(join(work, 'token-key.pem'), keyFile);
    copyFileSync(join(work, 'token-cert.pem'), certFile);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  console.log(`wrote ${keyFile} and ${certFile}`);
}
if (owner) {
  const [uid, gid] = owner.split(':').map(Number);
  chownSync(keyFile, uid, gid);
}
