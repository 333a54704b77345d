import { bootstrap } from '#tern/service';
import { AutoscalerModule } from './autoscaler.module.js';

await bootstrap('autoscaler', { module: AutoscalerModule.forRoot });
