export * from './observation.js';
export * from './policies.js';
export * from './decide.js';
export * from './loads.js';
export * from './memory.js';
export * from './predictive.js';
export * from './simulator/index.js';
export * from './concurrency.js';
