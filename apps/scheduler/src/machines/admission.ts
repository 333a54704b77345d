import { gpuTypeMatches } from '#tern/contracts';

/**
 * Whether a heartbeating machine meets its pool's requirements. Pure: the scheduler feeds it
 * the machine row and the pool row on every heartbeat and network test, so a changed pool
 * rule or a new test result takes effect on the next beat.
 */
export interface AdmissionPool {
  readonly name: string;
  /** Empty admits any machine, CPU-only included. */
  readonly allowedGpuTypes: readonly string[];
  readonly minNetworkMbps: number | null;
}

export interface AdmissionPath {
  readonly throughputMbps: number;
  readonly error?: string;
}

export interface AdmissionMachine {
  readonly gpus: readonly { readonly index: number; readonly model: string }[];
  /** The latest network test, when one is known: until then the network does not count against it. */
  readonly networkTest?: { readonly nats: AdmissionPath; readonly http: AdmissionPath } | null;
}

export type Admission = { readonly schedulable: true } | { readonly schedulable: false; readonly reason: string };

/** The slower leg of a network test: requests travel over NATS, images and volumes over HTTP. */
export function slowerPath(test: NonNullable<AdmissionMachine['networkTest']>): { path: 'nats' | 'http'; result: AdmissionPath } {
  return test.http.throughputMbps < test.nats.throughputMbps ? { path: 'http', result: test.http } : { path: 'nats', result: test.nats };
}

export function admit(machine: AdmissionMachine, pool: AdmissionPool): Admission {
  if (pool.allowedGpuTypes.length) {
    const allowed = pool.allowedGpuTypes.join(', ');
    if (!machine.gpus.length) {
      return { schedulable: false, reason: `no GPU: pool "${pool.name}" admits only machines with ${allowed}` };
    }
    const stranger = machine.gpus.find((g) => !pool.allowedGpuTypes.some((t) => gpuTypeMatches(g.model, t)));
    if (stranger) {
      return {
        schedulable: false,
        reason: `GPU ${stranger.index} (${stranger.model}) is not a type pool "${pool.name}" allows (${allowed})`,
      };
    }
  }
  if (pool.minNetworkMbps !== null && pool.minNetworkMbps > 0 && machine.networkTest) {
    const { path, result } = slowerPath(machine.networkTest);
    if (result.error) {
      return {
        schedulable: false,
        reason: `network test over ${path} failed (${result.error}); pool "${pool.name}" needs ${pool.minNetworkMbps} Mbps`,
      };
    }
    if (result.throughputMbps < pool.minNetworkMbps) {
      return {
        schedulable: false,
        reason: `network ${Math.round(result.throughputMbps)} Mbps (${path}) is below pool "${pool.name}"'s minimum of ${pool.minNetworkMbps} Mbps`,
      };
    }
  }
  return { schedulable: true };
}
