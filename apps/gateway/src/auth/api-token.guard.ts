import { type CanActivate, type ExecutionContext, ForbiddenException, Injectable, UnauthorizedException } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthService } from './auth.service.js';
import { PRINCIPAL } from './principal.js';
import { IS_PUBLIC } from '#tern/observability';

export const ADMIN_ONLY = 'ternAdminOnly';

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
      throw new UnauthorizedException('missing token: send "Authorization: Bearer <token>" (the admin token is printed by npm run up)');
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new UnauthorizedException('malformed Authorization header: expected "Bearer <token>"');
    const principal = await this.auth.verify(match[1]);
    if (!principal) throw new UnauthorizedException('invalid or revoked token');
    if (this.reflector.getAllAndOverride<boolean>(ADMIN_ONLY, targets) && principal.role !== 'admin') {
      throw new ForbiddenException('this action needs an admin token');
    }
    request[PRINCIPAL] = principal;
    return true;
  }
}
