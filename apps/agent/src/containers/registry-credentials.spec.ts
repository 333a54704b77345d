import { type MachineRegisterResponse } from '#tern/contracts';
import { type AgentSettings } from '../settings/agent-settings.js';
import { registryCredentials } from './registry-credentials.js';

const registration = (registry: MachineRegisterResponse['registry']) =>
  ({ machineId: 'm-1', pool: 'default', registry }) as MachineRegisterResponse;

describe('registryCredentials', () => {
  it('logs in with the machine id and its current machine token under token auth, read at each call', () => {
    const settings = { token: 'tern_m_first' } as AgentSettings;
    const ctx = { registration: registration({ host: '127.0.0.1:5000', insecure: true, tokenAuth: true }), settings };
    expect(registryCredentials(ctx)).toEqual([{ host: '127.0.0.1:5000', insecure: true, username: 'm-1', password: 'tern_m_first' }]);
    settings.token = 'tern_m_rotated';
    expect(registryCredentials(ctx)[0]!.password).toBe('tern_m_rotated');
  });

  it('uses the static user the gateway handed over, anonymous without one, nothing without a registry', () => {
    const settings = { token: 'tern_m' } as AgentSettings;
    const fixed = registration({ host: 'r.example.com', insecure: false, username: 'puller', password: 'pw' });
    expect(registryCredentials({ registration: fixed, settings })).toEqual([
      { host: 'r.example.com', insecure: false, username: 'puller', password: 'pw' },
    ]);
    expect(registryCredentials({ registration: registration({ host: 'r.example.com', insecure: false }), settings })).toEqual([
      { host: 'r.example.com', insecure: false },
    ]);
    expect(registryCredentials({ registration: registration(undefined), settings })).toEqual([]);
  });
});
