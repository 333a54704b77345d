import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { SANDBOX_FILE_MAX_BYTES } from '#tern/contracts';
import { installRawBody, MAX_ENDPOINT_BODY_BYTES } from '../endpoints/raw-body.js';
import { ImagesModule } from '../images/images.module.js';
import { RegistryTokensModule } from '../registry-tokens/registry-tokens.module.js';
import { SandboxCallsController } from './sandbox-calls.controller.js';
import { SandboxCallsService } from './sandbox-calls.service.js';
import { SandboxPlacer } from './sandbox-placer.js';
import { SandboxPortsController, SandboxPublicPortsController } from './sandbox-ports.controller.js';
import { SandboxSnapshots } from './sandbox-snapshots.service.js';
import { SandboxSweeper } from './sandbox-sweeper.js';
import { SandboxTunnels } from './sandbox-tunnels.js';
import { SandboxesController } from './sandboxes.controller.js';
import { SandboxesService } from './sandboxes.service.js';

/** Sandboxes: containers a workspace drives over the API (see docs/architecture.md, Sandboxes). */
@Module({
  imports: [ImagesModule, RegistryTokensModule],
  controllers: [SandboxesController, SandboxCallsController, SandboxPortsController, SandboxPublicPortsController],
  providers: [SandboxPlacer, SandboxesService, SandboxSnapshots, SandboxCallsService, SandboxSweeper, SandboxTunnels],
  exports: [SandboxesService],
})
export class SandboxesModule implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly tunnels: SandboxTunnels,
  ) {}

  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    // A file's bytes arrive as they are, whatever their content type, up to the files API's limit.
    if (!fastify) return;
    // WebSockets to sandbox ports and shells: the upgrade never reaches a route.
    fastify.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.tunnels.upgrade(req, socket, head));
    installRawBody(fastify, {
      prefix: '/sandbox',
      matches: (_method, url) => /^\/sandbox(-public)?\//.test(url),
      name: 'sandbox-port',
      maxBytes: MAX_ENDPOINT_BODY_BYTES,
      tooLarge: 'a request to a sandbox port may carry at most 16 MiB',
    });
    installRawBody(fastify, {
      prefix: '/api/v1/sandboxes/',
      matches: (method, url) => method === 'PUT' && /^\/api\/v1\/sandboxes\/[^/?]+\/files(\?|$)/.test(url),
      name: 'sandbox-file',
      maxBytes: SANDBOX_FILE_MAX_BYTES,
      tooLarge: `a sandbox file may hold at most ${SANDBOX_FILE_MAX_BYTES / 2 ** 20} MiB`,
    });
  }
}
