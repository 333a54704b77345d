#!/usr/bin/env node
// NATS operator material and users, for a NATS that `npm run up` does not start itself
// (docker-compose, Kubernetes, an external server) and for the test harness. Needs `npm run build`.
//   node scripts/nats-auth.mjs init <dir> [--host 0.0.0.0] [--port 4222] [--operator <another dir>/operator] [--tls-cert F --tls-key F]
//       operator, system and Tern accounts (once), <dir>/server.conf, <dir>/signer.json, <dir>/creds/admin.creds
//   node scripts/nats-auth.mjs creds <dir> <namespace> <principal>...
//       <dir>/creds/<namespace>/<principal>.creds (gateway, scheduler, autoscaler, metering, reputation); prints the paths
import { main, UserError } from './lib/log.mjs';
import { prepareServer, writeAdminCreds, writeCreds } from './lib/nats-auth.mjs';
import { CONTROL_PLANE as SERVICES } from './lib/paths.mjs';

const USAGE = 'usage: nats-auth.mjs init <dir> [--host H] [--port P] | creds <dir> <namespace> <principal>...';

await main(async () => {
  const [command, dir, ...rest] = process.argv.slice(2);
  if (!dir) throw new UserError(USAGE);
  if (command === 'init') {
    const opt = (name, fallback) => {
      const i = rest.indexOf(`--${name}`);
      return i >= 0 ? rest[i + 1] : fallback;
    };
    const tls = opt('tls-cert') ? { certFile: opt('tls-cert'), keyFile: opt('tls-key') } : undefined;
    const f = await prepareServer(dir, {
      host: opt('host', '0.0.0.0'),
      port: Number(opt('port', '4222')),
      operatorDir: opt('operator'),
      tls,
    });
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
  throw new UserError(USAGE);
});
