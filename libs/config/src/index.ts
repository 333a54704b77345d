export * from './variables.js';
export * from './config.js';
export * from './config.module.js';
export * from './version.js';
