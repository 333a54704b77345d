import { type CanActivate, type ExecutionContext, Injectable, UnauthorizedException } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { MACHINE_CALLER, MACHINE_TOKEN_ONLY } from './machine-caller.js';
import { MachineAuthService } from './machine-auth.service.js';

/** Runs before validation, so a stranger learns nothing about the body's rules. */
@Injectable()
export class MachineCallerGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly auth: MachineAuthService,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const request = ctx.switchToHttp().getRequest();
    const caller = await this.auth.identify(request.headers?.authorization as string | undefined);
    if (
      this.reflector.getAllAndOverride<boolean>(MACHINE_TOKEN_ONLY, [ctx.getHandler(), ctx.getClass()]) &&
      caller.kind !== 'machine-token'
    ) {
      throw new UnauthorizedException('this route takes the machine token the agent received when it registered');
    }
    request[MACHINE_CALLER] = caller;
    return true;
  }
}
