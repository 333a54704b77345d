import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, credsAuthenticator } from '@nats-io/transport-node';
import { writeAdminCreds } from '../scripts/lib/nats-auth.mjs';
import { startNats, stopNats } from '../scripts/lib/nats.mjs';
import { natsReachable } from '../scripts/lib/net.mjs';
import { freePort, waitFor } from './support/processes.js';
import { describeNeeding } from './support/real-parts.js';

/**
 * A `.tern/` made before operator mode, upgraded: its private NATS kept the streams under the
 * anonymous account; the first start in operator mode moves them into the Tern account, so
 * tasks, KV entries and the like are still there for the services' users.
 */
(await describeNeeding(['nats-server']))('upgrading the NATS store of a .tern/ from before operator mode', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'tern-nats-upgrade-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps the old streams' messages and KV entries, now in the Tern account", async () => {
    const natsDir = join(dir, 'nats');
    const store = join(natsDir, 'store');
    // The private NATS exactly as `npm run up` started it before operator mode.
    const oldUrl = `nats://127.0.0.1:${await freePort()}`;
    const old = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', new URL(oldUrl).port, '-sd', store], { stdio: 'ignore' });
    const oldExit = new Promise((r) => old.once('exit', r));
    try {
      await waitFor('the anonymous NATS', () => natsReachable(oldUrl), 15_000);
      const anonymous = await connect({ servers: oldUrl });
      await jetstreamManager(anonymous).then((jsm) => jsm.streams.add({ name: 'tern_TASKS', subjects: ['tern.task.>'] }));
      await jetstream(anonymous).publish('tern.task.submitted.v1', 'task 1');
      await (await new Kvm(anonymous).create('tern_deployments')).put('hello', 'version 3');
      await anonymous.close();
    } finally {
      old.kill();
      await oldExit;
    }

    const nats = await startNats({ dir: natsDir, port: await freePort(), logFile: join(dir, 'nats.log') });
    try {
      const nc = await connect({ servers: nats.url, authenticator: credsAuthenticator(readFileSync(await writeAdminCreds(natsDir))) });
      try {
        const kv = await new Kvm(nc).open('tern_deployments');
        expect((await kv.get('hello'))?.string()).toBe('version 3');
        const jsm = await jetstreamManager(nc);
        expect((await jsm.streams.info('tern_TASKS')).state.messages).toBe(1);
        expect((await jsm.streams.getMessage('tern_TASKS', { seq: 1 }))?.string()).toBe('task 1');
      } finally {
        await nc.close();
      }
      expect(existsSync(join(store, 'jetstream', '$G'))).toBe(false);
    } finally {
      await stopNats(nats);
    }
  }, 60_000);
});
