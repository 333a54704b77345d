export * from './contract.js';
export * from './domain.js';
export * from './streams.js';
export * from './validation.js';
export * from './messages.js';
export * from './payload-fields.js';
export * from './nats-doc.js';
export * from './http/machine-register.js';
