import { type CanActivate, type ExecutionContext, ForbiddenException, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthService } from './auth.service.js';
import { PRINCIPAL } from './principal.js';
import { IS_PUBLIC } from '#tern/observability';
import { type ApiTokenRole } from '#tern/persistence';

export const REQUIRED_ROLES = 'ternRequiredRoles';

function refusal(roles: readonly ApiTokenRole[]): string {
  return roles.includes('admin') ? 'this action needs a workspace admin token' : 'this action needs an operator token';
}

/** Every route needs `Authorization: Bearer <token>` unless marked @Public(). */
@Injectable()
export class ApiTokenGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly auth: AuthService,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    // Global guards also run on NATS handlers, which have no bearer token: they are internal.
    if (ctx.getType() !== 'http') return true;
    const targets = [ctx.getHandler(), ctx.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, targets)) return true;
    const request = ctx.switchToHttp().getRequest();
    const principal = await this.auth.authenticate(request.headers?.authorization as string | undefined);
    const roles = this.reflector.getAllAndOverride<ApiTokenRole[] | undefined>(REQUIRED_ROLES, targets);
    if (roles && !roles.includes(principal.role)) throw new ForbiddenException(refusal(roles));
    request[PRINCIPAL] = principal;
    return true;
  }
}
