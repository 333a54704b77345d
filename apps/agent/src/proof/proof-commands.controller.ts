import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  AGENT_PROOF_CHALLENGE,
  AGENT_PROOF_PREPARE,
  AGENT_PROOF_PROBE,
  HardwareChallenge,
  type HardwareAnswer,
  type HardwareCommitment,
  HardwareProbe,
  HardwareProverPrepare,
  type HardwareProverReady,
} from '#tern/contracts';
import { OnRequest } from '#tern/messaging';
import { ProofsService } from './proofs.service.js';

/** Hardware challenges for this machine only: `<ns>.agent.<own machine id>.proof.{prepare,challenge,probe}.v1`. */
@Controller()
export class ProofCommandsController {
  constructor(private readonly proofs: ProofsService) {}

  @OnRequest(AGENT_PROOF_PREPARE, { tokens: ['machineId'] })
  prepare(@Payload() request: HardwareProverPrepare): Promise<HardwareProverReady> {
    return this.proofs.prepare(request);
  }

  @OnRequest(AGENT_PROOF_CHALLENGE, { tokens: ['machineId'] })
  async challenge(@Payload() challenge: HardwareChallenge): Promise<HardwareCommitment> {
    return { root: await this.proofs.challenge(challenge) };
  }

  @OnRequest(AGENT_PROOF_PROBE, { tokens: ['machineId'] })
  probe(@Payload() probe: HardwareProbe): Promise<HardwareAnswer> {
    return this.proofs.probe(probe);
  }
}
