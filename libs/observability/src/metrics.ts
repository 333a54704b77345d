import { Controller, Get, Header } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { collectDefaultMetrics, register } from 'prom-client';
import { Public } from './public.js';

let initialised = false;

/** Process metrics (CPU, memory, event loop lag, GC) labelled with the service, once per process. */
export function initMetrics(service: string): void {
  if (initialised) return;
  initialised = true;
  register.setDefaultLabels({ service });
  collectDefaultMetrics({ prefix: 'tern_' });
}

@ApiExcludeController()
@Public()
@Controller('metrics')
export class MetricsController {
  @Get()
  @Header('Content-Type', register.contentType)
  metrics(): Promise<string> {
    return register.metrics();
  }
}
