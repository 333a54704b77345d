#!/usr/bin/env node
// NATS operator material and users, for a NATS that `npm run up` does not start itself
// (docker-compose, Kubernetes, an external server) and for the test harness. Needs `npm run build`.
//   node scripts/nats-auth.mjs init <dir> [--host 0.0.0.0] [--port 4222] [--operator <another dir>/operator] [--tls-cert F --tls-key F]
//       operator, system and Tern accounts (once), <dir>/server.conf, <dir>/signer.json, <dir>/creds/admin.creds
//   node scripts/nats-auth.mjs creds <dir> <namespace> <principal>...
//       <dir>/creds/<namespace>/<principal>.creds (gateway, scheduler, autoscaler, metering, reputation); prints the paths
//   node scripts/nats-auth.mjs deploy <dir> [--namespace tern] [--store-dir /data] [--resolver-dir /data/jwt] [--owner UID:GID] [--host H] [--port P]
//       [--leaf-port P] [--js-domain D] (k8s: 7422 and tern: leaf nodes of remote sites connect there and reach JetStream in domain D)
//       one folder per reader (docker-compose's nats-auth service): <dir>/operator (every seed), <dir>/server/server.conf,
//       <dir>/gateway/{nats.creds,signer.json}, <dir>/<service>/nats.creds; keys made once, JWTs re-issued
//   node scripts/nats-auth.mjs k8s <dir> [--namespace tern] [--k8s-namespace tern] [deploy's options]
//       deploy, then prints the Secrets k8s/ mounts (tern-nats-server, tern-nats-<service>): pipe it to kubectl apply -f -
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { main, UserError } from './lib/log.mjs';
import { prepareServer, writeAdminCreds, writeCreds, writeDeployment } from './lib/nats-auth.mjs';
import { CONTROL_PLANE as SERVICES } from './lib/paths.mjs';

const USAGE =
  'usage: nats-auth.mjs init <dir> [--host H] [--port P] | creds <dir> <namespace> <principal>... | deploy <dir> [options] | k8s <dir> [options]';

await main(async () => {
  const [command, dir, ...rest] = process.argv.slice(2);
  if (!dir) throw new UserError(USAGE);
  const opt = (name, fallback) => {
    const i = rest.indexOf(`--${name}`);
    return i >= 0 ? rest[i + 1] : fallback;
  };
  const tls = opt('tls-cert') ? { certFile: opt('tls-cert'), keyFile: opt('tls-key') } : undefined;
  const listen = { host: opt('host', '0.0.0.0'), port: Number(opt('port', '4222')), tls };
  if (command === 'init') {
    const f = await prepareServer(dir, { ...listen, operatorDir: opt('operator') });
    const admin = await writeAdminCreds(dir);
    console.log(JSON.stringify({ config: f.config, signer: f.signer, admin }));
    return 0;
  }
  if (command === 'creds') {
    const [namespace, ...principals] = rest;
    if (!namespace || !principals.length) throw new UserError(USAGE);
    const unknown = principals.filter((p) => !SERVICES.includes(p));
    if (unknown.length)
      throw new UserError(`not a service: ${unknown.join(', ')} (one of ${SERVICES.join(', ')}; machines get theirs at registration)`);
    console.log(JSON.stringify(await writeCreds(dir, namespace, principals)));
    return 0;
  }
  if (command === 'deploy' || command === 'k8s') {
    const owner = opt('owner');
    if (owner !== undefined && !/^\d+:\d+$/.test(owner)) throw new UserError(`--owner ${owner}: give UID:GID, e.g. 1000:1000`);
    const out = await writeDeployment(dir, {
      ...listen,
      namespace: opt('namespace', 'tern'),
      storeDir: opt('store-dir', '/data'),
      resolverDir: opt('resolver-dir', '/data/jwt'),
      // k8s runs NATS as a 3-node cluster that remote sites join as leaf nodes (k8s/nats.yaml).
      leafPort: Number(opt('leaf-port', command === 'k8s' ? '7422' : '0')) || undefined,
      jetStreamDomain: opt('js-domain', command === 'k8s' ? 'tern' : undefined),
      ...(owner ? { owner: { uid: Number(owner.split(':')[0]), gid: Number(owner.split(':')[1]) } } : {}),
    });
    if (command === 'deploy') console.log(JSON.stringify(out));
    else console.log(k8sSecrets(out, opt('k8s-namespace', 'tern')));
    return 0;
  }
  throw new UserError(USAGE);
});

/** One Secret per reader: tern-nats-server (server.conf) and tern-nats-<service> (its folder's files). */
function k8sSecrets({ server, principals }, namespace) {
  const secret = (name, folder) => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'tern' } },
    type: 'Opaque',
    stringData: Object.fromEntries(readdirSync(folder).map((f) => [f, readFileSync(join(folder, f), 'utf8')])),
  });
  const docs = [
    secret('tern-nats-server', join(server, '..')),
    ...Object.entries(principals).map(([svc, folder]) => secret(`tern-nats-${svc}`, folder)),
  ];
  return docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
}
