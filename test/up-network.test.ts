import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { Agent, fetch as pinnedFetch } from 'undici';
import { startStack } from './support/stack.js';
import { makeCertificates } from './support/tls.js';

/** An IPv4 address this machine holds on a non-loopback interface: what another machine on its network would use. */
function ownAddress(): string {
  const found = Object.values(networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal);
  if (!found) throw new Error('this test needs a non-loopback IPv4 address on this machine');
  return found.address;
}

/**
 * `npm run up -- --public ADDRESS` with its private NATS: the gateway and NATS listen on ADDRESS
 * (not on loopback), the join line and the registration answer name ADDRESS, and the local agent
 * joins through it.
 */
describe('npm run up -- --public, --tls-cert', () => {
  it('binds the gateway and the private NATS to the public address and hands it to agents', async () => {
    const address = ownAddress();
    const stack = await startStack('public', { args: ['--public', address], env: { NATS_URL: undefined } });
    try {
      const port = new URL(stack.gateway).port;
      expect(stack.gateway).toBe(`http://${address}:${port}`);
      const joins = /Machines join:\s+gateway (\S+), NATS (nats:\/\/\S+)/.exec(stack.output);
      expect(joins?.[1]).toBe(stack.gateway);
      const natsUrl = joins![2];
      expect(natsUrl).toMatch(new RegExp(`^nats://${address.replaceAll('.', '\\.')}:\\d+$`));
      expect(stack.output).toContain('Plaintext over the network');

      // Bound to the address only: loopback is refused.
      const loopback = await fetch(`http://127.0.0.1:${port}/health/live`).catch(
        (e: Error & { cause?: { code?: string } }) => e.cause?.code,
      );
      expect(loopback).toBe('ECONNREFUSED');
      const health = await fetch(`${stack.gateway}/health/ready`);
      expect(((await health.json()) as { agents: unknown[] }).agents).toHaveLength(1);

      // What a machine elsewhere is told: the tern-agent init line and the registration answer.
      const created = await stack.tern('machine', 'create', '--pool', 'default', '--id', 'remote-1', '--json');
      expect(created.code).toBe(0);
      const machine = JSON.parse(created.stdout) as { joinToken: string; command: string };
      expect(machine.command).toMatch(new RegExp(`^tern-agent init --gateway ${stack.gateway} --token `));
      const registered = await fetch(`${stack.gateway}/api/v1/machine/register`, {
        method: 'POST',
        headers: { authorization: `Bearer ${machine.joinToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          pool: 'default',
          agentVersion: '0.1.0',
          inventory: {
            hostname: 'remote-1',
            cpu: { model: 'test', cores: 1, threads: 1 },
            memoryBytes: 2 ** 30,
            disks: [],
            os: { platform: 'linux', distro: 'Debian', release: '12', kernel: '6.1', arch: 'x64' },
            networkInterfaces: [],
            gpus: [],
          },
        }),
      });
      expect(registered.status).toBe(200);
      expect(((await registered.json()) as { nats: { servers: string[] } }).nats.servers).toEqual([natsUrl]);
    } finally {
      await stack.stop();
    }
  }, 240_000);

  it('serves HTTPS and a TLS-only private NATS with --tls-cert/--tls-key, its own agent joining through the CA', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tern-up-tls-'));
    const certs = makeCertificates(dir);
    const stack = await startStack('uptls', {
      args: ['--tls-cert', certs.serverCert, '--tls-key', certs.serverKey, '--tls-ca', certs.caCert],
      env: { NATS_URL: undefined },
    });
    try {
      expect(stack.gateway).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      expect(stack.output).toMatch(/Network:\s+127\.0\.0\.1 only, TLS/);
      expect(stack.output).toContain(`--ca ${certs.caCert}`);
      const trusting = new Agent({ connect: { ca: readFileSync(certs.caCert, 'utf8') } });
      const ready = await pinnedFetch(`${stack.gateway}/health/ready`, { dispatcher: trusting });
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { agents: unknown[] }).agents).toHaveLength(1);
      const untrusted = await fetch(`${stack.gateway}/health/ready`).catch((e: Error & { cause?: { code?: string } }) => e.cause?.code);
      expect(untrusted).toMatch(/SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE/);

      const run = JSON.parse(readFileSync(join(stack.env.TERN_HOME!, 'run.json'), 'utf8')) as { nats: { url: string } };
      const nc = await connect({ servers: run.nats.url, tls: { caFile: certs.caCert } });
      await nc.close();
      await expect(connect({ servers: run.nats.url, reconnect: false })).rejects.toThrow(/self[- ]signed|unable to verify/i);
    } finally {
      await stack.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
