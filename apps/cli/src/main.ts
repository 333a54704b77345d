import { ApiError } from './api-client.js';
import { ternProgram } from './program.js';

const program = ternProgram();

try {
  await program.parseAsync(process.argv);
} catch (e) {
  process.stderr.write(`tern: ${e instanceof ApiError ? e.message : (e as Error).message}\n`);
  process.exit(1);
}
