import { Module } from '@nestjs/common';
import { ContainerLifecycleService } from './container-lifecycle.service.js';
import { ContainersController } from './containers.controller.js';
import { PlacementModule } from '../placement/placement.module.js';

@Module({ imports: [PlacementModule], controllers: [ContainersController], providers: [ContainerLifecycleService] })
export class ContainersModule {}
