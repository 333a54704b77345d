import { Module } from '@nestjs/common';
import { PlacementModule } from '../placement/placement.module.js';
import { AnswerChecker } from './answer-checker.js';
import { MachineVerifier } from './machine-verifier.js';
import { ProofRounds } from './proof-rounds.js';

/** Proof of hardware: the scheduler challenges machines and keeps what it found on their rows. */
@Module({
  imports: [PlacementModule],
  // AnswerChecker's one argument, the worker's script, is its own default: no provider gives it.
  providers: [{ provide: AnswerChecker, useFactory: () => new AnswerChecker() }, ProofRounds, MachineVerifier],
})
export class VerificationModule {}
