import { Module } from '@nestjs/common';
import { DeploymentLogsService } from './deployment-logs.service.js';
import { DeploymentRecords } from './deployment-records.js';
import { DeploymentsController } from './deployments.controller.js';
import { DeploymentsService } from './deployments.service.js';

@Module({
  controllers: [DeploymentsController],
  providers: [DeploymentsService, DeploymentRecords, DeploymentLogsService],
  exports: [DeploymentsService],
})
export class DeploymentsModule {}
