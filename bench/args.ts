import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;
type Values<O extends Options> = ReturnType<typeof parseArgs<{ options: O; strict: true }>>['values'];

/**
 * A bench's command line: `--help` prints its usage and exits 0; an unknown or malformed option
 * prints what was wrong and the usage, and exits 2, instead of a stack trace.
 */
export function benchArgs<const O extends Options>(usage: string, options: O): Values<O> {
  if (process.argv.slice(2).some((a) => a === '--help' || a === '-h')) {
    console.log(usage.trim());
    process.exit(0);
  }
  try {
    return parseArgs({ options, strict: true }).values as Values<O>;
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${usage.trim()}`);
    process.exit(2);
  }
}
