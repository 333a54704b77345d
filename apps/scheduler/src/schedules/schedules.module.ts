import { Module } from '@nestjs/common';
import { ScheduleFirer } from './schedule-firer.js';

/** Schedules of functions and task queues: one task per tick, claimed in Postgres (see docs/architecture.md, Schedules). */
@Module({ providers: [ScheduleFirer] })
export class SchedulesModule {}
