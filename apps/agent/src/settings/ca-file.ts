import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** Why the file is not a PEM certificate the agent can pin, or undefined when it is. */
export function caProblem(path: string): string | undefined {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (e) {
    return `cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
  }
  try {
    const cert = new X509Certificate(pem);
    if (!cert.ca)
      return `${path} is a certificate but not a CA's (basicConstraints CA:FALSE); give the CA that signed the gateway's certificate`;
  } catch {
    return `${path} is not a PEM certificate`;
  }
  return undefined;
}

/** `tern-agent init --ca FILE`: a copy in the state dir, so the agent does not depend on where FILE was. */
export function keepCa(stateDir: string, path: string): string {
  mkdirSync(resolve(stateDir), { recursive: true, mode: 0o700 });
  const kept = join(resolve(stateDir), 'ca.pem');
  if (resolve(path) !== kept) copyFileSync(path, kept);
  return kept;
}
