import { Module } from '@nestjs/common';
import { ImagePins } from '../images/image-pins.service.js';
import { TasksModule } from '../tasks/tasks.module.js';
import { DeploymentLogsService } from './deployment-logs.service.js';
import { DeploymentRecords } from './deployment-records.js';
import { DeploymentsController } from './deployments.controller.js';
import { DeploymentsService } from './deployments.service.js';

@Module({
  imports: [TasksModule],
  controllers: [DeploymentsController],
  providers: [DeploymentsService, DeploymentRecords, DeploymentLogsService, ImagePins],
  exports: [DeploymentsService],
})
export class DeploymentsModule {}
