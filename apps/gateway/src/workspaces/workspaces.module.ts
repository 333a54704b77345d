import { Module } from '@nestjs/common';
import { DeploymentsModule } from '../deployments/deployments.module.js';
import { ImagesModule } from '../images/images.module.js';
import { NatsUsersModule } from '../nats-users/nats-users.module.js';
import { SandboxesModule } from '../sandboxes/sandboxes.module.js';
import { VolumesModule } from '../volumes/volumes.module.js';
import { WorkspaceDeletion } from './workspace-deletion.service.js';
import { WorkspacePurgeSweeper } from './workspace-purge-sweeper.js';
import { WorkspacesController } from './workspaces.controller.js';
import { WorkspacesService } from './workspaces.service.js';

@Module({
  imports: [DeploymentsModule, ImagesModule, NatsUsersModule, SandboxesModule, VolumesModule],
  controllers: [WorkspacesController],
  providers: [WorkspacesService, WorkspaceDeletion, WorkspacePurgeSweeper],
})
export class WorkspacesModule {}
