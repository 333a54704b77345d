import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type NatsConnection } from '@nats-io/transport-node';
import { connect } from '@nats-io/transport-node';
import { freePort } from './processes.js';

/** PEM files of a throw-away CA and a server certificate it signed for 127.0.0.1 and localhost. */
export interface TestCertificates {
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
}

function openssl(args: string[], cwd: string) {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA (CA:TRUE) and a server certificate for 127.0.0.1 and localhost signed by it, made with openssl under `dir`. */
export function makeCertificates(dir: string, name = 'tern-test'): TestCertificates {
  mkdirSync(dir, { recursive: true });
  const f = (file: string) => join(dir, `${name}-${file}`);
  const c: TestCertificates = { caCert: f('ca.pem'), caKey: f('ca.key'), serverCert: f('server.pem'), serverKey: f('server.key') };
  openssl(
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', `/CN=${name} CA`]
      .concat(['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'])
      .concat(['-keyout', c.caKey, '-out', c.caCert]),
    dir,
  );
  const extensions = f('server.ext');
  writeFileSync(
    extensions,
    'basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n',
  );
  openssl(
    ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1'].concat([
      '-keyout',
      c.serverKey,
      '-out',
      f('server.csr'),
    ]),
    dir,
  );
  openssl(
    ['x509', '-req', '-in', f('server.csr'), '-CA', c.caCert, '-CAkey', c.caKey, '-CAcreateserial', '-days', '2'].concat([
      '-extfile',
      extensions,
      '-out',
      c.serverCert,
    ]),
    dir,
  );
  return c;
}

/** A private nats-server with JetStream that requires TLS (server certificate from `certs`), on a free loopback port. */
export async function startTlsNats(dir: string, certs: TestCertificates): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(
    'nats-server',
    ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', join(dir, 'nats-store'), '--tls', '--tlscert', certs.serverCert].concat([
      '--tlskey',
      certs.serverKey,
    ]),
    { stdio: 'ignore' },
  );
  const url = `nats://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const nc: NatsConnection | undefined = await connect({ servers: url, tls: { caFile: certs.caCert } }).catch(() => undefined);
    if (nc) {
      await nc.close();
      break;
    }
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`nats-server with TLS did not start on ${url}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}
