export * from './field.js';
export * from './matrices.js';
export * from './merkle.js';
export * from './protocol.js';
