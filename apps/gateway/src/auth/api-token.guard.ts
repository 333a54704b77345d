import { type CanActivate, type ExecutionContext, ForbiddenException, Injectable, UnauthorizedException } from '@nestjs/common';
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
    const header = request.headers?.authorization as string | undefined;
    if (!header) {
      throw new UnauthorizedException('missing token: send "Authorization: Bearer <token>" (the operator token is printed by npm run up)');
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new UnauthorizedException('malformed Authorization header: expected "Bearer <token>"');
    const principal = await this.auth.verify(match[1]);
    if (!principal) throw new UnauthorizedException('invalid or revoked token');
    const roles = this.reflector.getAllAndOverride<ApiTokenRole[] | undefined>(REQUIRED_ROLES, targets);
    if (roles && !roles.includes(principal.role)) throw new ForbiddenException(refusal(roles));
    request[PRINCIPAL] = principal;
    return true;
  }
}
