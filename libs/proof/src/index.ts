export * from './bands.js';
export * from './device-claims.js';
export * from './field.js';
export * from './matrices.js';
export * from './merkle.js';
export * from './protocol.js';
export * from './verification.js';
export * from './wire.js';
