export * from './protocol.js';
export * from './client.js';
export * from './server.js';
export { bodiesStore, bodyObjectName, putBody, takeBody } from './bodies.js';
export { ChunkQueue } from './chunk-queue.js';
