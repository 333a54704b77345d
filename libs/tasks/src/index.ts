export * from './states.js';
export * from './retry-policy.js';
export * from './leases.js';
export * from './map-chunks.js';
export * from './spot-checks.js';
export * from './batch-reports.js';
