export * from './chunks.js';
export * from './registry-blobs.js';
export * from './volume-path.js';
