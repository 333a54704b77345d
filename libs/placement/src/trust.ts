import type { MachineView, PlacementRequest } from './types.js';

/** What a workload holds that a machine's owner could read on the machine that runs it. */
export interface WorkloadExposure {
  /** The spec's own word (`placement.verified`), which wins either way. */
  readonly verified?: boolean;
  /** Volumes it mounts (the workspace's data). */
  readonly volumes: number;
  /** Workspace secrets it uses (a registry credential, secret env). */
  readonly usesSecrets: boolean;
  /** Whether its image is private to the workspace (built by Tern, or mirrored with the workspace's credentials). */
  readonly privateImage: boolean;
}

/**
 * The trust tier a workload asks for: verified machines only when it holds what its workspace
 * would not hand a stranger (secrets, volumes, a private image), unless the spec says otherwise.
 * A workload that asks for no more may run on unverified machines; none runs on quarantined ones.
 */
export function needsVerifiedMachine(w: WorkloadExposure): boolean {
  return w.verified ?? (w.volumes > 0 || w.usesSecrets || w.privateImage);
}

/** Whether a machine may take the request at all by its verification: the one rule place() and placeMany() apply. */
export function trustedWith(request: Pick<PlacementRequest, 'verified'>, machine: Pick<MachineView, 'verification'>): boolean {
  return machine.verification !== 'quarantined' && (!request.verified || machine.verification === 'verified');
}
