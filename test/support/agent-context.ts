import { jest } from '@jest/globals';
import type { GpuInventory } from '#tern/contracts';
import type { AgentContext } from '../../apps/agent/src/agent-context.js';
import type { AgentSettings } from '../../apps/agent/src/settings/agent-settings.js';
import { AgentState } from '../../apps/agent/src/state/agent-state.js';

/**
 * What one agent session is given (AGENT_CONTEXT), for a unit spec of an agent service: machine
 * m-1 in pool `default` with a real AgentState (the dashboard's rows and log lines are what the
 * specs read back) and the GPUs given.
 */
export function agentContext(over: { gpus?: GpuInventory[]; settings?: Partial<AgentSettings> } = {}): AgentContext {
  const state = new AgentState('http://gateway.test', 'default');
  state.gpus = over.gpus ?? [];
  return {
    state,
    settings: {
      stateDir: '/nonexistent/tern-agent',
      gatewayUrl: 'http://gateway.test',
      token: 'machine-token',
      tokenSource: 'config.yaml',
      pool: 'default',
      runtime: 'runc',
      dashboard: 'off',
      network: 'host',
      dns: 'host',
      userNamespaces: 'off',
      imageCacheBytes: 1e9,
      builder: false,
      ...over.settings,
    },
    registration: { machineId: 'm-1', pool: 'default', heartbeatIntervalSeconds: 5 } as AgentContext['registration'],
    inventory: {} as AgentContext['inventory'],
    bootId: 1_700_000_000_000,
    reregister: jest.fn<AgentContext['reregister']>().mockResolvedValue(undefined),
  };
}
