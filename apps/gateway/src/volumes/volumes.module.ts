import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { acceptBinaryBodies } from '../binary-bodies.js';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { RegistryTokensModule } from '../registry-tokens/registry-tokens.module.js';
import { AgentVolumesController } from './agent-volumes.controller.js';
import { VolumeChunkStore } from './volume-chunk-store.js';
import { VolumesController } from './volumes.controller.js';
import { VolumesService } from './volumes.service.js';

@Module({
  imports: [MachineRegistrationModule, RegistryTokensModule],
  controllers: [VolumesController, AgentVolumesController],
  providers: [VolumeChunkStore, VolumesService],
  exports: [VolumesService],
})
export class VolumesModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit() {
    acceptBinaryBodies(this.adapterHost);
  }
}
