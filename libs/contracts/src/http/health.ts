/** The control-plane services that must all be up for the system to be ready. */
export type ControlPlaneRole = 'gateway' | 'scheduler' | 'autoscaler' | 'metering' | 'reputation';

export interface ServiceState {
  status: 'up' | 'down';
  instances: { id: string; host?: string; version: string; startedAt?: string }[];
  details?: unknown;
}

export interface AgentState {
  id: string;
  machineId?: string;
  pool?: string;
  host?: string;
  version: string;
}

/** `GET /health/ready`: 200 when every control-plane service answers, 503 otherwise. */
export interface SystemHealth {
  status: 'ok' | 'degraded';
  checkedAt: string;
  services: Record<ControlPlaneRole, ServiceState>;
  agents: AgentState[];
}
