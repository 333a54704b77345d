import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../scripts/lib/net.mjs';
import { startNats } from '../../scripts/lib/nats.mjs';
import { writeAdminCreds } from '../../scripts/lib/nats-auth.mjs';

/**
 * One id per test run: every schema and namespace the run creates starts with tt<id>_
 * (see isolation.ts), so global-teardown can sweep exactly what this run left behind.
 *
 * One NATS per run, in operator mode as `npm run up` runs it (scripts/lib/nats-auth.mjs): no
 * anonymous access, every service process its own least-privilege user (ServiceProcess asks
 * scripts/nats-auth.mjs for it), machines their own users from the gateway. The test process
 * itself connects as the run's admin user (TEST_NATS_CREDS), standing in for operator tools.
 */
export default async function globalSetup() {
  process.env.TERN_TEST_RUN ??= randomBytes(3).toString('hex');
  // Jest runs this once per project; the projects of one run share the server.
  if (globalThis.ternTestNats) return;
  const dir = mkdtempSync(join(tmpdir(), 'tern-test-nats-'));
  const port = await freePort();
  const nats = await startNats({ dir, port, logFile: join(dir, 'nats.log') });
  nats.child.unref();
  globalThis.ternTestNats = { ...nats, dir };
  process.env.TEST_NATS_URL = nats.url;
  process.env.TERN_NATS_AUTH_DIR = dir;
  process.env.TEST_NATS_CREDS = await writeAdminCreds(dir, 'test-harness');
}
