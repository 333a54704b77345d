import { Injectable, UnauthorizedException } from '@nestjs/common';
import { hashToken, MachinesRepository } from '#tern/persistence';
import { AuthService } from '../auth/auth.service.js';
import { type MachineCaller } from './machine-caller.js';

const KINDS = 'a join token (tern machine create), a machine token (from registration) or an operator API token';

/**
 * Tells the three kinds of bearer apart by where their hash is found. The machine routes are
 * public to the API-token guard and authenticated here instead, because two of the three
 * kinds are not API tokens at all.
 */
@Injectable()
export class MachineAuthService {
  constructor(
    private readonly machines: MachinesRepository,
    private readonly auth: AuthService,
  ) {}

  async identify(authorization: string | undefined): Promise<MachineCaller> {
    if (!authorization) throw new UnauthorizedException(`missing token: send "Authorization: Bearer <token>" with ${KINDS}`);
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!match) throw new UnauthorizedException('malformed Authorization header: expected "Bearer <token>"');
    const hash = hashToken(match[1]);
    const byJoinToken = await this.machines.findByJoinTokenHash(hash);
    if (byJoinToken) return { kind: 'join-token', machine: byJoinToken };
    const byCredential = await this.machines.findByCredentialHash(hash);
    if (byCredential) return { kind: 'machine-token', machine: byCredential };
    const principal = await this.auth.verify(match[1]);
    if (principal) return { kind: 'api-token', principal };
    throw new UnauthorizedException(`unknown token: expected ${KINDS}; a removed machine's tokens no longer work`);
  }
}
