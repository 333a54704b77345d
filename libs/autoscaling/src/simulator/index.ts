export * from './random.js';
export * from './traces.js';
export * from './simulate.js';
