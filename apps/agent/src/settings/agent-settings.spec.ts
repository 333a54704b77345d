import { resolveSettings } from './agent-settings.js';
import { AgentConfigError, sha256 } from './config-file.js';

const file = { gateway: 'http://gw:1994', token: 'tern_machine_mine', pool: 'gpu', machineId: 'm-1' };

describe('resolveSettings', () => {
  it('takes config.yaml when the environment says nothing', () => {
    expect(resolveSettings(file, {}, '/s')).toEqual({
      stateDir: '/s',
      gatewayUrl: 'http://gw:1994',
      token: 'tern_machine_mine',
      tokenSource: 'config.yaml',
      pool: 'gpu',
      machineId: 'm-1',
      runtime: 'runc',
      dashboard: 'auto',
      network: 'private',
      dns: 'host',
      userNamespaces: 'auto',
      imageCacheBytes: 50e9,
      builder: false,
    });
  });

  it('takes AGENT_DNS: host, off or resolvers, and names what is wrong in another value', () => {
    expect(resolveSettings(file, { AGENT_DNS: 'off' }, '/s').dns).toBe('off');
    expect(resolveSettings(file, { AGENT_DNS: '1.1.1.1, [2606:4700::1111]:53' }, '/s').dns).toBe('1.1.1.1, [2606:4700::1111]:53');
    expect(() => resolveSettings(file, { AGENT_DNS: '1.1.1.1,dns.example' }, '/s')).toThrow(
      'AGENT_DNS: dns must be host, off or resolver addresses (a[:port],…), not "dns.example"',
    );
  });

  it('makes the machine a builder with AGENT_BUILDER=true, and refuses other values', () => {
    expect(resolveSettings(file, { AGENT_BUILDER: 'true' }, '/s').builder).toBe(true);
    expect(() => resolveSettings(file, { AGENT_BUILDER: 'yes' }, '/s')).toThrow('AGENT_BUILDER: builder must be true or false, not "yes"');
  });

  it('lets AGENT_* variables override the file', () => {
    const s = resolveSettings(
      file,
      { AGENT_GATEWAY_URL: 'https://other/', AGENT_TOKEN: 'tern_admin', POOL: 'cpu', AGENT_DASHBOARD: 'off' },
      '/s',
    );
    expect(s).toMatchObject({
      gatewayUrl: 'https://other',
      token: 'tern_admin',
      tokenSource: 'AGENT_TOKEN',
      pool: 'cpu',
      dashboard: 'off',
    });
  });

  it('works from the environment alone (no config.yaml)', () => {
    expect(resolveSettings(undefined, { AGENT_GATEWAY_URL: 'http://gw', AGENT_TOKEN: 't' }, '/s')).toMatchObject({
      pool: 'default',
      machineId: undefined,
    });
  });

  it('uses the machine token when AGENT_TOKEN still holds the join token it replaced', () => {
    const spent = 'tern_join_spent';
    const s = resolveSettings({ ...file, replacedTokenSha256: sha256(spent) }, { AGENT_TOKEN: spent }, '/s');
    expect(s).toMatchObject({ token: 'tern_machine_mine', tokenSource: 'config.yaml', fallbackToken: spent });
  });

  it('explains what is missing and which variable is wrong', () => {
    expect(() => resolveSettings(undefined, {}, '/s')).toThrow(
      /no gateway configured: run `tern-agent init --gateway URL --token TOKEN --pool POOL` \(writes \/s\/config.yaml\)/,
    );
    try {
      resolveSettings(file, { AGENT_GATEWAY_URL: 'gw:1994', AGENT_RUNTIME: 'docker' }, '/s');
      throw new Error('expected a failure');
    } catch (e) {
      expect(e).toBeInstanceOf(AgentConfigError);
      expect((e as AgentConfigError).problems).toEqual([
        expect.stringMatching(/^AGENT_GATEWAY_URL: .*must start with http/),
        expect.stringMatching(/^AGENT_RUNTIME: runtime must be runc or nerdctl/),
      ]);
    }
  });
});
