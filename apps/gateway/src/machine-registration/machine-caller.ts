import { createParamDecorator, type ExecutionContext, SetMetadata } from '@nestjs/common';
import { type Machine } from '#tern/persistence';
import { type Principal } from '../auth/principal.js';

/** Who calls the machine routes: the bearer is one of three kinds of token. */
export type MachineCaller =
  /** From `tern machine create`: good for one registration, before it expires. */
  | { kind: 'join-token'; machine: Machine }
  /** Issued at registration: the agent's own credential for every later call. */
  | { kind: 'machine-token'; machine: Machine }
  /** An operator API token, as the local agent of `npm run up` uses: names the machine in the body. */
  | { kind: 'api-token'; principal: Principal };

export const MACHINE_CALLER = 'ternMachineCaller';
export const MACHINE_TOKEN_ONLY = 'ternMachineTokenOnly';

/** A machine route only the machine token may call (keepalive, and later the network test). */
export const MachineTokenOnly = () => SetMetadata(MACHINE_TOKEN_ONLY, true);

export const CurrentMachineCaller = createParamDecorator((_: unknown, ctx: ExecutionContext): MachineCaller => {
  return ctx.switchToHttp().getRequest()[MACHINE_CALLER];
});

/** The machine behind a machine-token caller (routes marked MachineTokenOnly). */
export const CurrentMachine = createParamDecorator((_: unknown, ctx: ExecutionContext): Machine => {
  const caller = ctx.switchToHttp().getRequest()[MACHINE_CALLER] as MachineCaller;
  if (caller.kind === 'api-token') throw new Error('CurrentMachine used on a route that admits API tokens');
  return caller.machine;
});
