import { Counter, Gauge } from 'prom-client';
import type { VerificationCount } from '#tern/persistence';

const verification = new Gauge({
  name: 'tern_machine_verification',
  help: 'Machines per pool and verification state (unverified, verified, quarantined), from the registry',
  labelNames: ['pool', 'state'],
});

const challenges = new Counter({
  name: 'tern_machine_challenges_total',
  help: 'Hardware challenges this scheduler ran, by device kind (cpu, gpu) and outcome (passed, failed, unanswered, unproven; busy: put off while its GPUs run work)',
  labelNames: ['device', 'outcome'],
});

export function countChallenge(device: string, outcome: 'passed' | 'failed' | 'unanswered' | 'unproven' | 'busy'): void {
  challenges.inc({ device: device.startsWith('gpu') ? 'gpu' : 'cpu', outcome });
}

export function setVerificationCounts(counts: readonly VerificationCount[]): void {
  verification.reset();
  for (const c of counts) verification.set({ pool: c.pool, state: c.verification }, c.count);
}
