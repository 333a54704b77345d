import { Module } from '@nestjs/common';
import { SystemHealthController } from './system-health.controller.js';
import { SystemHealthService } from './system-health.service.js';
import { SystemController } from './system.controller.js';

@Module({ controllers: [SystemHealthController, SystemController], providers: [SystemHealthService] })
export class SystemHealthModule {}
