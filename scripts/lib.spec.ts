import type { NetworkInterfaceInfo } from 'node:os';
import { mergeContext } from './lib/cli-config.mjs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exposure, optionValue, tlsFiles, urlHost } from './lib/exposure.mjs';
import { notUp, isReady, progressLine } from './lib/health.mjs';
import { readable } from './lib/logs.mjs';
import { hostPort, isPortFree, freePort, pickPort } from './lib/net.mjs';
import { newAdminToken } from './lib/state.mjs';
import { nextBackoff } from './lib/supervisor.mjs';

/** The pure parts of scripts/lib; scripts/up.mjs as a whole is exercised by test/up.test.ts. */
describe('scripts/lib', () => {
  it('admin tokens are tern_ + 43 base64url characters, never repeated', () => {
    const a = newAdminToken();
    expect(a).toMatch(/^tern_[A-Za-z0-9_-]{43}$/);
    expect(newAdminToken()).not.toBe(a);
  });

  it('merges the local context into an existing CLI config and makes it current', () => {
    const existing = { current: 'prod', contexts: { prod: { gateway: 'https://t.example', token: 'p' } }, editor: 'vim' };
    expect(mergeContext(existing, 'local', { gateway: 'http://127.0.0.1:1994', token: 't' })).toEqual({
      current: 'local',
      editor: 'vim',
      contexts: { prod: { gateway: 'https://t.example', token: 'p' }, local: { gateway: 'http://127.0.0.1:1994', token: 't' } },
    });
    expect(mergeContext(undefined, 'local', { gateway: 'g', token: 't' })).toEqual({
      current: 'local',
      contexts: { local: { gateway: 'g', token: 't' } },
    });
    expect(mergeContext([], 'local', { gateway: 'g', token: 't' }).contexts.local.gateway).toBe('g');
  });

  it('backs off 1 s, doubling to 30 s while a child keeps crashing, and starts over once it ran 30 s', () => {
    const seq: number[] = [];
    let b = 0;
    for (let i = 0; i < 7; i++) seq.push((b = nextBackoff(b, 500)));
    expect(seq).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    expect(nextBackoff(30000, 31_000)).toBe(1000);
  });

  it('reads host and port from NATS and Postgres URLs', () => {
    expect(hostPort('nats://127.0.0.1:4222', 4222)).toEqual({ host: '127.0.0.1', port: 4222 });
    expect(hostPort('nats://a:1,nats://b:2', 4222)).toEqual({ host: 'a', port: 1 });
    expect(hostPort('localhost', 4222)).toEqual({ host: 'localhost', port: 4222 });
    expect(hostPort('postgres://u:p@db/test', 5432)).toEqual({ host: 'db', port: 5432 });
  });

  it('finds free ports and keeps claimed ones apart', async () => {
    const claimed = new Set<number>();
    const a = await pickPort(0, claimed);
    const b = await pickPort(a, claimed);
    expect(a).not.toBe(b);
    expect(await isPortFree(a)).toBe(true);
    expect(await freePort(new Set([a, b]))).not.toBe(a);
  });

  it('tells what is not up from a /health/ready answer', () => {
    const up = { status: 'up', instances: [] };
    const body = {
      status: 'degraded',
      services: { gateway: up, scheduler: { status: 'down', instances: [] }, autoscaler: up, metering: up, reputation: up },
      agents: [],
    };
    expect(notUp({ body })).toEqual(['scheduler', 'agent']);
    expect(notUp({ error: 'ECONNREFUSED' })).toEqual(['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation', 'agent']);
    expect(isReady({ body })).toBe(false);
    const ok = { ...body, status: 'ok', services: { ...body.services, scheduler: up }, agents: [{ id: 'a' }] };
    expect(isReady({ body: ok })).toBe(true);
    expect(isReady({ body: { ...ok, agents: [] } })).toBe(false);
    expect(progressLine({ body }, 3000)).toContain('agents');
  });

  it('makes pino lines readable and leaves other lines alone', () => {
    expect(readable('{"level":50,"time":"2026-01-01T10:00:00.123Z","context":"X","msg":"boom","err":{"message":"bad"}}')).toBe(
      '10:00:00.123 ERROR [X] boom — bad',
    );
    expect(readable('plain text')).toBe('plain text');
  });

  it('keeps npm run up on loopback unless --public names an address, and binds that address when this machine holds it', () => {
    const interfaces = {
      lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true }],
      eth0: [{ address: '192.0.2.2', family: 'IPv4', internal: false }],
    } as unknown as NodeJS.Dict<NetworkInterfaceInfo[]>;
    expect(exposure({ args: [], env: {}, interfaces })).toEqual({
      address: undefined,
      bindHost: '127.0.0.1',
      localHost: '127.0.0.1',
      advertisedHost: '127.0.0.1',
    });
    expect(exposure({ args: ['--public', '192.0.2.2'], env: {}, interfaces })).toEqual({
      address: '192.0.2.2',
      bindHost: '192.0.2.2',
      localHost: '192.0.2.2',
      advertisedHost: '192.0.2.2',
    });
    // A NATed public IP or a name: every interface, reached locally on loopback.
    expect(exposure({ args: ['--public=203.0.113.7'], env: {}, interfaces })).toMatchObject({
      bindHost: '0.0.0.0',
      localHost: '127.0.0.1',
    });
    expect(exposure({ args: [], env: { TERN_PUBLIC_ADDRESS: 'tern.example.com' }, interfaces })).toMatchObject({
      address: 'tern.example.com',
      bindHost: '0.0.0.0',
      advertisedHost: 'tern.example.com',
    });
    expect(() => exposure({ args: ['--public'], env: {}, interfaces })).toThrow('--public needs a value');
    expect(() => exposure({ args: ['--public', '0.0.0.0'], env: {}, interfaces })).toThrow('not the wildcard');
    expect(() => exposure({ args: ['--public', 'http://x'], env: {}, interfaces })).toThrow('not an IP address or a host name');
    expect(optionValue(['--detach', '--public', 'a'], '--public')).toBe('a');
    expect(urlHost('2001:db8::1')).toBe('[2001:db8::1]');
    expect(urlHost('192.0.2.2')).toBe('192.0.2.2');
  });

  it('takes TLS files for npm run up: both the certificate and its key, readable, the CA optional', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tern-up-tls-'));
    try {
      const pem = join(dir, 'x.pem');
      writeFileSync(pem, 'pem');
      expect(tlsFiles([], {})).toBeUndefined();
      expect(tlsFiles(['--tls-cert', pem, '--tls-key', pem], {})).toEqual({ certFile: pem, keyFile: pem });
      expect(tlsFiles([], { TERN_TLS_CERT_FILE: pem, TERN_TLS_KEY_FILE: pem, TERN_TLS_CA_FILE: pem })).toEqual({
        certFile: pem,
        keyFile: pem,
        caFile: pem,
      });
      expect(() => tlsFiles(['--tls-cert', pem], {})).toThrow('--tls-key is missing');
      expect(() => tlsFiles(['--tls-ca', pem], {})).toThrow('--tls-ca needs --tls-cert and --tls-key');
      expect(() => tlsFiles(['--tls-cert', join(dir, 'nope'), '--tls-key', pem], {})).toThrow(
        /--tls-cert .*nope: cannot be read \(ENOENT\)/,
      );
      // With TLS the certificate names the public address, so this machine's clients use it too.
      const exposed = exposure({ args: ['--public', '203.0.113.7', '--tls-cert', pem, '--tls-key', pem], env: {}, interfaces: {} });
      expect(exposed).toMatchObject({ bindHost: '0.0.0.0', localHost: '203.0.113.7', tls: { certFile: pem } });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
