import { type MachineInventory, type MachineRegisterResponse } from '#tern/contracts';
import { type AgentSettings } from './settings/agent-settings.js';
import { type AgentState } from './state/agent-state.js';

export const AGENT_CONTEXT = Symbol('AGENT_CONTEXT');

/**
 * What one NATS session of the agent is given by the runner that registered it (the Nest
 * app lives for one session; the runner, the state and the dashboard outlive it).
 */
export interface AgentContext {
  readonly state: AgentState;
  readonly settings: AgentSettings;
  /** The registration answer this session was booted from. */
  readonly registration: MachineRegisterResponse;
  /** The inventory last sent to the gateway (replaced when a re-registration sends a new one). */
  inventory: MachineInventory;
  /**
   * Set by the runner before it closes this session only to open another (new NATS settings):
   * containers keep running and the next session adopts them. Otherwise closing the app stops them.
   */
  keepContainers?: boolean;
  /**
   * The `.creds` text for a JWT the gateway issued for this machine's own NATS key (its task
   * permits); absent when the installation gives machines no NATS user of their own.
   */
  readonly natsCreds?: (jwt: string) => string;
  /** When the agent process started (ms); heartbeat message ids carry it. */
  readonly bootId: number;
  /**
   * Registers again over HTTP (with this machine's token), e.g. with a changed inventory or
   * because the scheduler no longer knows the machine. A refusal ends the process; changed
   * NATS settings end this session so the runner boots a new one from the new answer.
   */
  reregister(reason: string, inventory?: MachineInventory): Promise<void>;
}
