export * from './entities/index.js';
export * from './migrations/index.js';
export * from './data-source.js';
export * from './run-migrations.js';
export * from './persistence.module.js';
export * from './hash-token.js';
export * from './database-errors.js';
export * from './query-rows.js';
