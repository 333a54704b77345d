export * from './intervals.js';
export * from './accrual.js';
export * from './resources.js';
export * from './rewards.js';
export * from './task-attempts.js';
