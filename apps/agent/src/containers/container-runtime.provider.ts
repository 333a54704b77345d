import { Logger, type Provider } from '@nestjs/common';
import { join } from 'node:path';
import { type ContainerRuntime, detectRuntime, ImageStore, type RuntimeLogger } from '#tern/runtime';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';

export const CONTAINER_RUNTIME = Symbol('CONTAINER_RUNTIME');

/** The runtime, or why there is none (the agent still joins; it refuses container starts with that reason). */
export type RuntimeHandle = { runtime: ContainerRuntime; problem?: undefined } | { runtime?: undefined; problem: string };

function runtimeLogger(): RuntimeLogger {
  const logger = new Logger('runtime');
  return {
    debug: (obj, msg) => logger.debug(obj, msg ?? ''),
    info: (obj, msg) => logger.log(obj, msg ?? ''),
    warn: (obj, msg) => logger.warn(obj, msg ?? ''),
    error: (obj, msg) => logger.error(obj, msg ?? ''),
  };
}

/**
 * Containers, images and volumes live under the agent's state directory: `runtime/` (runc's
 * root and bundles), `images/`, `volumes/<workspace>/<volume>`.
 */
export const containerRuntimeProvider: Provider = {
  provide: CONTAINER_RUNTIME,
  inject: [AGENT_CONTEXT],
  useFactory: async (ctx: AgentContext): Promise<RuntimeHandle> => {
    const dir = ctx.settings.stateDir;
    try {
      const runtime = await detectRuntime({
        prefer: ctx.settings.runtime,
        stateDir: join(dir, 'runtime'),
        images: new ImageStore({ root: join(dir, 'images') }),
        volumeRoot: join(dir, 'volumes'),
        logger: runtimeLogger(),
      });
      new Logger('containers').log(`container runtime: ${runtime.kind} (state in ${join(dir, 'runtime')})`);
      return { runtime };
    } catch (e) {
      const problem = (e as Error).message;
      new Logger('containers').warn(`no container runtime (${problem}); container starts will be refused`);
      return { problem };
    }
  },
};
