import { Module } from '@nestjs/common';
import { CodeModule } from '../code/code.module.js';
import { RegistryTokensModule } from '../registry-tokens/registry-tokens.module.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { HeartbeatSnapshotReader } from '../machines/heartbeat-snapshot-reader.js';
import { ImageBuildsController } from './image-builds.controller.js';
import { ImageBuildsService } from './image-builds.service.js';
import { ImageDeletes } from './image-deletes.service.js';
import { ImagePins } from './image-pins.service.js';
import { ImagesController } from './images.controller.js';
import { RegistryImages } from './registry-images.js';

/** Images: builds on builder machines, pinning registry references to digests for deployments, deletes from Tern's registry. */
@Module({
  imports: [CodeModule, RegistryTokensModule, SecretsModule],
  controllers: [ImageBuildsController, ImagesController],
  providers: [ImageBuildsService, ImagePins, HeartbeatSnapshotReader, RegistryImages, ImageDeletes],
  exports: [ImagePins, RegistryImages],
})
export class ImagesModule {}
