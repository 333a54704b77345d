import { type NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { TERN_VERSION } from '#tern/config';
import { documentEndpointsRoute } from './endpoints/endpoints.route.js';

/** OpenAPI document at /docs-json, browsable at /docs. */
export function configureOpenApi(app: NestFastifyApplication): void {
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Tern API')
      .setDescription('Deploy GPU handlers, invoke endpoints, run task queues, manage machines and usage.')
      .setVersion(TERN_VERSION)
      .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'An API token (tern token create)' })
      .addSecurityRequirements('bearer')
      .build(),
  );
  documentEndpointsRoute(document);
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'docs-json' });
}
