export * from './observation.js';
export * from './policies.js';
export * from './decide.js';
export * from './loads.js';
