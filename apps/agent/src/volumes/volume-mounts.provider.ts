import { join } from 'node:path';
import type { Provider } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { ChunkCache } from './chunk-cache.js';
import { VolumeMounts } from './volume-mounts.js';

/** One VolumeMounts per agent, shared by containers and sandboxes: one chunk cache, one commit at a time per mount. */
export const volumeMountsProvider: Provider = {
  provide: VolumeMounts,
  inject: [AGENT_CONTEXT, TERN_CONFIG],
  useFactory: (ctx: AgentContext, config: TernConfig) => {
    const gateway = () => ({ gatewayUrl: ctx.settings.gatewayUrl, token: ctx.settings.token });
    const volumesDir = join(ctx.settings.stateDir, 'volumes');
    return new VolumeMounts(
      volumesDir,
      new ChunkCache(join(volumesDir, 'chunks'), config.agent.volumeCacheBytes),
      gateway,
      ctx.settings.siteCache,
    );
  },
};
