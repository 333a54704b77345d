export * from './chunks.js';
export * from './registry-blobs.js';
export * from './volume-path.js';
export * from './http-get.js';
export * from './site-cache.js';
export * from './sha256-threads.js';
export { type BodyPieces, getStreamed, type StreamedAnswer, type StreamedBody } from './http-into.js';
