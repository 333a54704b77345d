import { Module } from '@nestjs/common';
import { ContainerLifecycleService } from './container-lifecycle.service.js';
import { ContainersController } from './containers.controller.js';

@Module({ controllers: [ContainersController], providers: [ContainerLifecycleService] })
export class ContainersModule {}
