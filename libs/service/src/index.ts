export * from './bootstrap.js';
export * from './core.module.js';
export * from './presence.service.js';
export * from './http/index.js';
