import { bootstrap } from '#tern/service';
import { GatewayModule } from './gateway.module.js';
import { configureOpenApi } from './openapi.js';

await bootstrap('gateway', { module: GatewayModule.forRoot, configureHttp: configureOpenApi });
