import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;
type Values<O extends Options> = ReturnType<typeof parseArgs<{ options: O; strict: true }>>['values'];

/** What a command line asks of a bench: its values, or a text to print and the exit code to end with. */
export type BenchCommand<O extends Options> = { values: Values<O>; positionals: string[] } | { exit: 0 | 2; text: string };

/**
 * Reads a bench's command line: `--help` or `-h` anywhere before `--` asks for the usage (exit 0);
 * an unknown option, a malformed value, or more or fewer positionals than `positionals` allows
 * gets what was wrong and the usage (exit 2).
 */
export function readBenchArgs<const O extends Options>(
  argv: readonly string[],
  usage: string,
  options: O,
  positionals: { min: number; max: number } = { min: 0, max: 0 },
): BenchCommand<O> {
  const text = usage.trim();
  const end = argv.indexOf('--');
  if ((end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h')) return { exit: 0, text };
  try {
    const parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: positionals.max > 0 });
    const n = parsed.positionals.length;
    if (n < positionals.min || n > positionals.max) {
      const wanted = positionals.min === positionals.max ? `${positionals.min}` : `${positionals.min} to ${positionals.max}`;
      return { exit: 2, text: `expected ${wanted} argument(s) besides the options, got ${n}\n\n${text}` };
    }
    return { values: parsed.values as Values<O>, positionals: parsed.positionals };
  } catch (e) {
    return { exit: 2, text: `${(e as Error).message}\n\n${text}` };
  }
}

/**
 * A bench's command line (process.argv): `--help` prints its usage and exits 0; an unknown or
 * malformed option prints what was wrong and the usage, and exits 2, instead of a stack trace.
 */
export function benchCommand<const O extends Options>(
  usage: string,
  options: O,
  positionals?: { min: number; max: number },
): { values: Values<O>; positionals: string[] } {
  const command = readBenchArgs(process.argv.slice(2), usage, options, positionals);
  if ('values' in command) return command;
  if (command.exit === 0) console.log(command.text);
  else console.error(command.text);
  process.exit(command.exit);
}

/** benchCommand for a bench that takes options only: their values. */
export function benchArgs<const O extends Options>(usage: string, options: O): Values<O> {
  return benchCommand(usage, options).values;
}
