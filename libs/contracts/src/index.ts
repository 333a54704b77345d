// Every service validates through these contracts: the rule lookups are kept from the first use.
import './validation-metadata-cache.js';
export * from './contract.js';
export * from './domain.js';
export * from './gpu-types.js';
export * from './streams.js';
export * from './validation.js';
export * from './messages.js';
export * from './payload-fields.js';
export * from './nats-doc.js';
export * from './http/machine-register.js';
export * from './http/machine-network-test.js';
export * from './http/agent-data.js';
export * from './http/agent-task-permit.js';
export * from './http/index.js';
export * from './buckets.js';
export * from './deployment/deployment-spec.js';
export * from './deployment/image-spec.js';
export * from './deployment/resolved-spec.js';
export * from './deployment/records.js';
export * from './deployment/task-policy.js';
export * from './deployment/schedule.js';
export * from './permissions.js';
export * from './sandbox/sandbox-spec.js';
export * from './volume/volumes.js';
export * from './secret/secrets.js';
// Last: it imports payload classes, which must not register their contracts ahead of the others.
export * from './compiled-validation.js';
