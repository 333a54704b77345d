import { bootstrap } from '#tern/service';
import { SchedulerModule } from './scheduler.module.js';

await bootstrap('scheduler', { module: SchedulerModule.forRoot });
