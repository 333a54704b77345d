import { bootstrap } from '#tern/service';
import { ReputationModule } from './reputation.module.js';

await bootstrap('reputation', { module: ReputationModule.forRoot });
