import { Module } from '@nestjs/common';
import { CodeModule } from '../code/code.module.js';
import { RegistryTokensModule } from '../registry-tokens/registry-tokens.module.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { HeartbeatSnapshotReader } from '../machines/heartbeat-snapshot-reader.js';
import { ImageBuildsController } from './image-builds.controller.js';
import { ImageBuildsService } from './image-builds.service.js';
import { ImagePins } from './image-pins.service.js';

/** Images: builds on builder machines, and pinning registry references to digests for deployments. */
@Module({
  imports: [CodeModule, RegistryTokensModule, SecretsModule],
  controllers: [ImageBuildsController],
  providers: [ImageBuildsService, ImagePins, HeartbeatSnapshotReader],
  exports: [ImagePins],
})
export class ImagesModule {}
