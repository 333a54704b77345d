import { bootstrap } from '#tern/service';
import { AgentModule } from './agent.module.js';

await bootstrap('agent', { module: AgentModule.forRoot });
