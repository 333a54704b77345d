import { Module } from '@nestjs/common';
import { SchedulesController } from './schedules.controller.js';

/** Schedules as the API shows them (the scheduler fires them; see docs/architecture.md, Schedules). */
@Module({ controllers: [SchedulesController] })
export class SchedulesModule {}
