import { Module } from '@nestjs/common';
import { PlacementModule } from '../placement/placement.module.js';
import { MachineVerifier } from './machine-verifier.js';
import { ProofRounds } from './proof-rounds.js';

/** Proof of hardware: the scheduler challenges machines and keeps what it found on their rows. */
@Module({
  imports: [PlacementModule],
  providers: [ProofRounds, MachineVerifier],
})
export class VerificationModule {}
