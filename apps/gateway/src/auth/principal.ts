import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { type ApiTokenRole } from '#tern/persistence';

/** Who is calling: resolved from the bearer token by ApiTokenGuard. */
export interface Principal {
  workspaceId: string;
  workspaceName: string;
  tokenId: string;
  role: ApiTokenRole;
}

export const PRINCIPAL = 'ternPrincipal';

export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  return ctx.switchToHttp().getRequest()[PRINCIPAL];
});
