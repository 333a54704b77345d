export * from './backoff.js';
export * from './ticker.js';
export * from './fire-and-forget.js';
export * from './map-limit.js';
export * from './throttle.js';
export * from './group-commit.js';
export * from './smoothed.js';
