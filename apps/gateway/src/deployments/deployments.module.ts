import { Module } from '@nestjs/common';
import { ImagesModule } from '../images/images.module.js';
import { TasksModule } from '../tasks/tasks.module.js';
import { DeploymentLogsService } from './deployment-logs.service.js';
import { DeploymentRecords } from './deployment-records.js';
import { DeploymentsController } from './deployments.controller.js';
import { DeploymentsService } from './deployments.service.js';

@Module({
  imports: [TasksModule, ImagesModule],
  controllers: [DeploymentsController],
  providers: [DeploymentsService, DeploymentRecords, DeploymentLogsService],
  exports: [DeploymentsService],
})
export class DeploymentsModule {}
