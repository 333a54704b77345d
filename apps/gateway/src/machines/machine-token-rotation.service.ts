import { ConflictException, Injectable, NotFoundException, UnauthorizedException } from '@nestjs/common';
import { type RotatedMachineToken } from '#tern/contracts';
import { hashToken, type Machine, MachinesRepository } from '#tern/persistence';
import { generateMachineToken } from './machine-tokens.js';

/**
 * Replaces a machine's token. The previous token stops working with the same statement: the
 * machine routes look the credential up on every call, nothing caches it.
 */
@Injectable()
export class MachineTokenRotationService {
  constructor(private readonly machines: MachinesRepository) {}

  /** The operator's rotation (`tern machine rotate-token`): the new token must reach the agent by hand. */
  async rotateByOperator(machineId: string): Promise<RotatedMachineToken> {
    const machineToken = generateMachineToken();
    if (await this.machines.replaceCredential(machineId, hashToken(machineToken))) return { machineId, machineToken };
    if (!(await this.machines.findById(machineId))) throw new NotFoundException(`machine "${machineId}" not found`);
    throw new ConflictException(
      `machine "${machineId}" has not registered yet: it has no machine token to rotate (its join token from tern machine create is still unused)`,
    );
  }

  /** The machine's own rotation, with the token it holds: only that token is replaced, once. */
  async rotateOwn(machine: Machine): Promise<RotatedMachineToken> {
    const machineToken = generateMachineToken();
    if (!machine.credentialHash || !(await this.machines.replaceCredential(machine.id, hashToken(machineToken), machine.credentialHash))) {
      throw new UnauthorizedException(`the machine token of "${machine.id}" was replaced meanwhile; this one no longer works`);
    }
    return { machineId: machine.id, machineToken };
  }
}
