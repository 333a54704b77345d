import type { MachineState } from '../domain.js';

/** `GET /api/v1/pools` (a list), `GET|PATCH /api/v1/pools/<name>`, `POST /api/v1/pools`. */
export interface PoolView {
  name: string;
  allowedGpuTypes: string[];
  minNetworkMbps: number | null;
  minReputation: number | null;
  createdAt: string;
  /** Machines in the pool, in all and by state. */
  machines: { total: number; byState: Partial<Record<MachineState, number>> };
}

/** A pool's admission rules: absent leaves a rule as it is (no rule on create), null removes it. `PATCH /api/v1/pools/<name>` (admin). */
export interface PoolRulesRequest {
  allowedGpuTypes?: string[] | null;
  minNetworkMbps?: number | null;
  minReputation?: number | null;
}

/** `POST /api/v1/pools` (admin). */
export interface CreatePoolRequest extends PoolRulesRequest {
  name: string;
}
