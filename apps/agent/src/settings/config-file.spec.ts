import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AgentConfigError,
  configPath,
  maskToken,
  parseConfigYaml,
  readConfigFile,
  renderConfigYaml,
  setConfigValue,
  showConfig,
  validateConfig,
  writeConfigFile,
} from './config-file.js';

const good = { gateway: 'https://tern.example.com/', token: 'tern_join_abcdefghijklmnopqrstuvwxyz0123456789', pool: 'gpu-a100' };

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof AgentConfigError) return e.problems;
    throw e;
  }
  throw new Error('expected an AgentConfigError');
}

describe('config.yaml', () => {
  it('validates and normalises (trailing slash dropped)', () => {
    expect(validateConfig(good)).toEqual({ ...good, gateway: 'https://tern.example.com' });
  });

  it('names every problem: bad URL, bad scheme, bad pool, unknown key, missing token', () => {
    expect(problems(() => validateConfig({ gateway: 'tern.example.com', pool: 'a b', color: 'red' }))).toEqual([
      expect.stringContaining('gateway: "tern.example.com" is not a URL; give the gateway\'s address'),
      expect.stringContaining('pool "a b" must be 1-63 letters'),
      expect.stringContaining('unknown key "color"'),
      expect.stringContaining('token is missing'),
    ]);
    expect(problems(() => validateConfig({ ...good, gateway: 'ftp://x' }))[0]).toContain('must start with http:// or https://');
    expect(problems(() => validateConfig({ ...good, machineId: 'has space' }))[0]).toContain('machine id "has space"');
    expect(problems(() => validateConfig(['x']))[0]).toContain('expected a mapping');
  });

  it('takes builder as YAML writes it (true, unquoted) or as a string, and nothing else', () => {
    expect(parseConfigYaml(`gateway: https://g\ntoken: t\npool: p\nbuilder: true\n`).builder).toBe('true');
    expect(validateConfig({ ...good, builder: 'false' }).builder).toBe('false');
    expect(problems(() => validateConfig({ ...good, builder: 'sometimes' }))[0]).toContain(
      'builder must be true or false, not "sometimes"',
    );
  });

  it("takes a site cache's http(s)://host:port, without a trailing slash, and refuses a path", () => {
    expect(validateConfig({ ...good, siteCache: 'http://10.0.0.5:5080/' }).siteCache).toBe('http://10.0.0.5:5080');
    expect(problems(() => validateConfig({ ...good, siteCache: 'http://10.0.0.5:5080/v2/' }))[0]).toContain(
      'siteCache must be http(s)://host[:port]',
    );
  });

  it('round-trips through YAML and reports syntax errors', () => {
    const config = validateConfig({ ...good, machineId: 'm-1', dashboard: 'off' });
    expect(parseConfigYaml(renderConfigYaml(config))).toEqual(config);
    expect(renderConfigYaml(config)).toMatch(/^# Tern agent configuration/);
    expect(problems(() => parseConfigYaml('gateway: [unclosed'))[0]).toMatch(/^config.yaml: /);
  });

  it('masks the token in show and never prints internal keys', () => {
    const shown = showConfig({ ...validateConfig(good), replacedTokenSha256: 'a'.repeat(64) });
    expect(shown).toContain('token: tern_joi…6789');
    expect(shown).not.toContain(good.token);
    expect(shown).not.toContain('replacedTokenSha256');
    expect(maskToken('short')).toBe('*****');
  });

  it('sets one key, validating it; an empty value removes an optional key; a new token forgets the replaced one', () => {
    const config = { ...validateConfig({ ...good, machineId: 'm-1' }), replacedTokenSha256: 'b'.repeat(64) };
    expect(setConfigValue(config, 'pool', 'cpu').pool).toBe('cpu');
    expect(setConfigValue(config, 'machineId', '').machineId).toBeUndefined();
    expect(setConfigValue(config, 'token', 'tern_new').replacedTokenSha256).toBeUndefined();
    expect(problems(() => setConfigValue(config, 'gateway', 'nope'))[0]).toContain('is not a URL');
    expect(problems(() => setConfigValue(config, 'replacedTokenSha256', 'c'.repeat(64)))[0]).toContain('unknown key');
    expect(problems(() => setConfigValue(config, 'pool', ''))[0]).toContain('pool "" must be');
  });

  it('is written with mode 600 in a 700 directory, atomically, and read back', () => {
    const parent = mkdtempSync(join(tmpdir(), 'tern-agent-'));
    const dir = join(parent, 'state');
    const path = writeConfigFile(dir, validateConfig(good));
    expect(path).toBe(configPath(dir));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readConfigFile(dir)?.pool).toBe('gpu-a100');
    expect(readFileSync(path, 'utf8')).toContain('gateway: https://tern.example.com\n');
    expect(readConfigFile(join(dir, 'nowhere'))).toBeUndefined();
    rmSync(parent, { recursive: true, force: true });
  });
});
