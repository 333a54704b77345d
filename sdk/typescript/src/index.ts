export * from './calls.js';
export * from './client.js';
export * from './config.js';
export * from './errors.js';
export * from './http.js';
export * from './maps.js';
export * from './sandboxes.js';
