export * from './api-error.js';
export * from './bad-input.js';
export * from './discard-body.js';
export * from './request-intake.js';
export * from './request-validation.pipe.js';
