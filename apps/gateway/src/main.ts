import { bootstrap } from '#tern/service';
import { serveDashboard } from './dashboard.js';
import { GatewayModule } from './gateway.module.js';
import { configureOpenApi } from './openapi.js';

await bootstrap('gateway', {
  module: GatewayModule.forRoot,
  configureHttp: async (app) => {
    configureOpenApi(app);
    await serveDashboard(app);
  },
});
