import { randomBytes } from 'node:crypto';

/** One id per `npm test` run: every schema and namespace the run creates starts with tt<id>_. */
export default async function globalSetup() {
  process.env.TERN_TEST_RUN ??= randomBytes(3).toString('hex');
}
