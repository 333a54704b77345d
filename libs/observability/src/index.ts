export * from './logger.js';
export * from './metrics.js';
export * from './health.js';
export * from './observability.module.js';
export * from './public.js';
