import { type TernConfig } from '#tern/config';
import { DEFAULT_PARAMS, HOUR_MS, type ReputationParams } from '#tern/reputation';

export const REPUTATION_PARAMS = Symbol('REPUTATION_PARAMS');

/** The scoring defaults with the deployment's half-life and heartbeat interval. */
export function reputationParams(config: TernConfig): ReputationParams {
  return {
    ...DEFAULT_PARAMS,
    halfLifeMs: config.reputation.halfLifeHours * HOUR_MS,
    heartbeatIntervalMs: config.machines.heartbeatIntervalSeconds * 1000,
  };
}
