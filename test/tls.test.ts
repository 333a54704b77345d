import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { Agent, fetch as pinnedFetch } from 'undici';
import { ADMIN, AgentProcess, ControlPlane, removeStateDir, tempStateDir, ternAgent } from './agent/harness.js';
import { describeNeeding } from './support/real-parts.js';
import { makeCertificates, startTlsNats, type TestCertificates } from './support/tls.js';

/** What a TLS refusal says, whichever the side that noticed. */
const UNTRUSTED = /SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|unable to verify|self[- ]signed/i;

const describeTls = await describeNeeding(['nats-server', 'openssl']);

/**
 * TLS end to end with a CA made here: the gateway serves HTTPS, its NATS requires TLS, and an
 * agent that pinned the CA (tern-agent init --ca) joins over both. Clients without the CA (or
 * with another) are refused.
 */
describeTls('TLS: the gateway over HTTPS, NATS over TLS, an agent pinning the CA', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tern-tls-'));
  let certs: TestCertificates;
  let stranger: TestCertificates;
  let nats: Awaited<ReturnType<typeof startTlsNats>>;
  let plane: ControlPlane;
  const agents: AgentProcess[] = [];
  const dirs: string[] = [];

  const trusting = (ca: string) => new Agent({ connect: { ca: readFileSync(ca, 'utf8') } });
  const refusal = (e: unknown) => {
    const err = e as Error & { cause?: Error & { code?: string } };
    return `${err.cause?.code ?? ''} ${err.cause?.message ?? err.message}`;
  };

  beforeAll(async () => {
    certs = makeCertificates(dir);
    stranger = makeCertificates(dir, 'stranger');
    nats = await startTlsNats(dir, certs);
    plane = await ControlPlane.start('tls', {
      NATS_URL: nats.url,
      NATS_TLS_CA_FILE: certs.caCert,
      TLS_CERT_FILE: certs.serverCert,
      TLS_KEY_FILE: certs.serverKey,
    });
    plane.base = plane.base.replace(/^http:/, 'https:');
  }, 120_000);

  afterAll(async () => {
    for (const a of agents) await a.stop();
    [...agents.map((a) => a.stateDir), ...dirs].forEach(removeStateDir);
    await plane?.stop();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves HTTPS to a client that trusts the CA, and a client without it (or with another CA) is refused', async () => {
    const ok = await pinnedFetch(`${plane.base}/health/live`, { dispatcher: trusting(certs.caCert) });
    expect(ok.status).toBe(200);
    expect(refusal(await fetch(`${plane.base}/health/live`).catch((e: unknown) => e))).toMatch(UNTRUSTED);
    expect(
      refusal(await pinnedFetch(`${plane.base}/health/live`, { dispatcher: trusting(stranger.caCert) }).catch((e: unknown) => e)),
    ).toMatch(UNTRUSTED);
    // Plain HTTP on the HTTPS port gets no API answer.
    const plain = await fetch(plane.base.replace(/^https:/, 'http:') + '/health/live').then(
      (r) => r.status,
      () => 'refused',
    );
    expect(plain).not.toBe(200);
  });

  it('connects services to NATS over TLS with the CA; a client without it, or with another CA, is refused', async () => {
    // The gateway and the scheduler reached each other over the TLS NATS: /health/ready sees the scheduler.
    const ready = await pinnedFetch(`${plane.base}/health/ready`, { dispatcher: trusting(certs.caCert) });
    const body = (await ready.json()) as { services: Record<string, { status: string }> };
    expect(body.services.gateway.status).toBe('up');
    expect(body.services.scheduler.status).toBe('up');

    const trusted = await connect({ servers: nats.url, tls: { caFile: certs.caCert } });
    await trusted.close();
    await expect(connect({ servers: nats.url, reconnect: false })).rejects.toThrow(UNTRUSTED);
    await expect(connect({ servers: nats.url, reconnect: false, tls: { caFile: stranger.caCert } })).rejects.toThrow(UNTRUSTED);
  });

  it('lets an agent that pinned the CA join over HTTPS and NATS/TLS; one without it cannot register', async () => {
    const refusedDir = tempStateDir();
    dirs.push(refusedDir);
    const refusedCa = await ternAgent([
      'init',
      '--gateway',
      plane.base,
      '--token',
      ADMIN,
      '--ca',
      certs.serverCert,
      '--state-dir',
      refusedDir,
    ]);
    expect(refusedCa.code).toBe(78);
    expect(refusedCa.stderr).toMatch(/--ca: .* is a certificate but not a CA's/);
    const missing = await ternAgent([
      'init',
      '--gateway',
      plane.base,
      '--token',
      ADMIN,
      '--ca',
      join(dir, 'nope.pem'),
      '--state-dir',
      refusedDir,
    ]);
    expect(missing.stderr).toMatch(/--ca: cannot read .*nope\.pem \(ENOENT\)/);
    const garbage = await ternAgent(['init', '--gateway', plane.base, '--token', ADMIN, '--ca', certs.caKey, '--state-dir', refusedDir]);
    expect(garbage.stderr).toMatch(/--ca: .* is not a PEM certificate/);

    const stateDir = tempStateDir();
    const init = await ternAgent(['init', '--gateway', plane.base, '--token', ADMIN, '--ca', certs.caCert, '--state-dir', stateDir]);
    expect(init.code).toBe(0);
    const pinned = new AgentProcess(stateDir, { MACHINE_ID: 'tls-agent' });
    agents.push(pinned);
    expect(pinned.configFile().ca).toBe(join(stateDir, 'ca.pem'));
    pinned.start();
    await pinned.joined();
    const ready = await pinnedFetch(`${plane.base}/health/ready`, { dispatcher: trusting(certs.caCert) });
    expect(((await ready.json()) as { agents: { machineId: string }[] }).agents.map((a) => a.machineId)).toContain('tls-agent');

    const unpinned = AgentProcess.forPlane(plane, { MACHINE_ID: 'no-ca-agent' });
    agents.push(unpinned);
    unpinned.start();
    const failed = await unpinned.waitForLog(/registration attempt 1 failed/);
    expect(String(failed.msg)).toMatch(UNTRUSTED);
  });
});
