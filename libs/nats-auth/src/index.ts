export * from './installation.js';
export * from './permissions.js';
export * from './users.js';
export * from './revocation.js';
export * from './native-keys.js';
