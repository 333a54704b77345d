export * from './entities/index.js';
export * from './migrations/index.js';
export * from './data-source.js';
export * from './run-migrations.js';
export * from './persistence.module.js';
export * from './hash-token.js';
export * from './database-errors.js';
export * from './query-rows.js';
export * from './repositories/index.js';
// GroupCommit lives in #tern/timing (the agent batches its task reports with it); re-exported for its callers here.
export { GroupCommit } from '#tern/timing';
