export * from './types.js';
export * from './place.js';
export * from './resources.js';
export * from './usage.js';
export * from './backoff.js';
export * from './machine-views.js';
export * from './place-many.js';
export * from './crash-loop.js';
