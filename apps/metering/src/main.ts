import { bootstrap } from '#tern/service';
import { MeteringModule } from './metering.module.js';

await bootstrap('metering', { module: MeteringModule.forRoot });
