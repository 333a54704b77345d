import { randomBytes } from 'node:crypto';

/**
 * One id per test run: every schema and namespace the run creates starts with tt<id>_
 * (see isolation.ts), so global-teardown can sweep exactly what this run left behind.
 */
export default async function globalSetup() {
  process.env.TERN_TEST_RUN ??= randomBytes(3).toString('hex');
}
