export * from './chunks.js';
export * from './volume-path.js';
