/**
 * The public HTTP API's request and response bodies, as plain interfaces: the gateway's view
 * builders declare them as their return types (or check their own types against them), and
 * the CLI reads its answers with them, so neither side can drift without failing type-checking.
 * Timestamps are ISO 8601 strings, as they arrive in JSON.
 */
export * from './json.js';
export * from './deployments.js';
export * from './tasks.js';
export * from './functions.js';
export * from './maps.js';
export * from './schedules.js';
export * from './machines.js';
export * from './pools.js';
export * from './usage.js';
export * from './tokens.js';
export * from './health.js';
export * from './nats-users.js';
export * from './sandboxes.js';
