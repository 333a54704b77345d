export * from './backoff.js';
export * from './ticker.js';
export * from './fire-and-forget.js';
