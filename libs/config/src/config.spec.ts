import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from './config.js';
import { VARIABLES } from './variables.js';

describe('loadConfig', () => {
  it('applies defaults, including per-service ones', () => {
    expect(loadConfig('gateway', {}).http.port).toBe(1994);
    expect(loadConfig('scheduler', {}).http.port).toBe(1995);
    expect(loadConfig('agent', {}).http.port).toBe(0);
    expect(loadConfig('gateway', {}).nats).toMatchObject({ servers: ['nats://127.0.0.1:4222'], namespace: 'tern' });
  });

  it('types what it reads', () => {
    const c = loadConfig('gateway', { HTTP_PORT: '8080', DATABASE_RUN_MIGRATIONS: 'no', NATS_URL: 'nats://a:1, nats://b:2' });
    expect(c.http.port).toBe(8080);
    expect(c.database.runMigrations).toBe(false);
    expect(c.nats.servers).toEqual(['nats://a:1', 'nats://b:2']);
  });

  it('lists every problem at once, naming the variable and the rule', () => {
    let error: unknown;
    try {
      loadConfig('gateway', { HTTP_PORT: 'eighty', LOG_LEVEL: 'loud', NATS_NAMESPACE: 'a.b' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toContain('HTTP_PORT="eighty": must be a whole number');
    expect(problems).toContain('LOG_LEVEL="loud": must be one of');
    expect(problems).toContain('NATS_NAMESPACE="a.b"');
  });

  it('rejects out-of-range ports', () => {
    expect(() => loadConfig('gateway', { HTTP_PORT: '70000' })).toThrow('must be at most 65535');
  });

  it('takes TLS files only when they can be read, and certificates only with their keys', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tern-config-'));
    try {
      const pem = join(dir, 'x.pem');
      writeFileSync(pem, 'pem');
      const c = loadConfig('gateway', { TLS_CERT_FILE: pem, TLS_KEY_FILE: pem, NATS_TLS_CA_FILE: pem });
      expect(c.http.tls).toEqual({ certFile: pem, keyFile: pem });
      expect(c.nats.tls).toEqual({ caFile: pem, certFile: undefined, keyFile: undefined });
      expect(loadConfig('gateway', {}).http.tls).toBeUndefined();
      expect(loadConfig('gateway', {}).nats.tls).toBeUndefined();
      // The scheduler does not serve HTTPS: TLS_CERT_FILE is not its variable.
      expect(loadConfig('scheduler', { TLS_CERT_FILE: pem }).http.tls).toBeUndefined();
      expect(() => loadConfig('gateway', { TLS_CERT_FILE: join(dir, 'missing.pem'), TLS_KEY_FILE: pem })).toThrow(
        /TLS_CERT_FILE=".*missing.pem": cannot be read \(ENOENT\)/,
      );
      expect(() => loadConfig('gateway', { TLS_CERT_FILE: dir, TLS_KEY_FILE: pem })).toThrow('is not a file');
      expect(() => loadConfig('gateway', { TLS_CERT_FILE: pem })).toThrow('TLS_CERT_FILE is set but TLS_KEY_FILE is not');
      expect(() => loadConfig('agent', { NATS_TLS_KEY_FILE: pem })).toThrow('NATS_TLS_KEY_FILE is set but NATS_TLS_CERT_FILE is not');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes registry token auth when the key file is set, with defaults, and static users otherwise', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tern-config-'));
    try {
      const key = join(dir, 'token-key.pem');
      writeFileSync(key, 'pem');
      const url = 'http://127.0.0.1:5000';
      expect(
        loadConfig('gateway', { REGISTRY_URL: url, REGISTRY_TOKEN_KEY_FILE: key, REGISTRY_BUILDER_POOLS: 'build, gpu-build' }).registry,
      ).toEqual({
        url,
        host: '127.0.0.1:5000',
        insecure: true,
        token: { keyFile: key, service: 'tern-registry', issuer: 'tern', ttlSeconds: 300, builderPools: ['build', 'gpu-build'] },
      });
      const fixed = loadConfig('gateway', { REGISTRY_URL: url, REGISTRY_PULL_USERNAME: 'p', REGISTRY_PULL_PASSWORD: 'x' }).registry;
      expect(fixed).toEqual({ url, host: '127.0.0.1:5000', insecure: true, pull: { username: 'p', password: 'x' } });
      expect(() => loadConfig('gateway', { REGISTRY_URL: url, REGISTRY_TOKEN_TTL_SECONDS: '5' })).toThrow('must be at least 30');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes a SECRETS_KEY of 32 bytes in base64 only', () => {
    const key = Buffer.alloc(32, 7).toString('base64');
    expect(loadConfig('gateway', { SECRETS_KEY: key }).secretsKey).toBe(key);
    expect(loadConfig('gateway', {}).secretsKey).toBeUndefined();
    for (const bad of ['change-me', Buffer.alloc(16).toString('base64'), Buffer.alloc(33).toString('base64')])
      expect(() => loadConfig('gateway', { SECRETS_KEY: bad })).toThrow('SECRETS_KEY must be 32 random bytes in base64');
  });

  it('gives every variable a description', () => {
    for (const v of VARIABLES) expect(v.description.length).toBeGreaterThan(10);
  });

  it.each([
    ['BOOTSTRAP_ADMIN_TOKEN', 'tern_insecure-default-admin-token-change-me', 'gateway'],
    ['BOOTSTRAP_ADMIN_TOKEN', 'change-me', 'gateway'],
    ['AGENT_TOKEN', 'tern_insecure-default-admin-token-change-me', 'agent'],
  ] as const)('refuses %s=%s, naming what to set', (name, value, service) => {
    expect(() => loadConfig(service, { [name]: value })).toThrow(`${name} is a published placeholder: set it to a random secret`);
  });

  it.each(['tern', 'change-me', 'CHANGE-ME-please'])('refuses a database password %s', (password) => {
    expect(() => loadConfig('scheduler', { DATABASE_URL: `postgres://tern:${password}@postgres:5432/tern` })).toThrow(
      'DATABASE_URL: its password is a published placeholder',
    );
  });

  it('accepts random secrets and a password-less local database', () => {
    const token = 'tern_3q2-7wEhxk4VvY0Ezqv6Wb1n8GkqkZ3o9T2sYq1c5Hk';
    expect(loadConfig('gateway', { BOOTSTRAP_ADMIN_TOKEN: token }).bootstrapAdminToken).toBe(token);
    expect(loadConfig('gateway', { DATABASE_URL: 'postgres://tern:8f3c2e91d0a4b7@postgres:5432/tern' }).database.url).toContain(
      '8f3c2e91d0a4b7',
    );
    expect(loadConfig('gateway', {}).database.url).toBe('postgres://postgres@127.0.0.1:5432/tern');
  });
});
