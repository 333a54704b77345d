import { readBenchArgs } from './args.js';

const USAGE = `
Usage: node dist/bench/x/main.js [--runs 5] [--gateway URL --token T]
`;
const OPTIONS = {
  runs: { type: 'string', default: '5' },
  gateway: { type: 'string' },
  token: { type: 'string' },
  verbose: { type: 'boolean' },
} as const;
const TEXT = USAGE.trim();

describe('readBenchArgs', () => {
  it('gives the values, with their defaults', () => {
    expect(readBenchArgs([], USAGE, OPTIONS)).toEqual({ values: { runs: '5' }, positionals: [] });
    expect(readBenchArgs(['--runs', '9', '--gateway=http://g', '--verbose'], USAGE, OPTIONS)).toEqual({
      values: { runs: '9', gateway: 'http://g', verbose: true },
      positionals: [],
    });
  });

  it('answers --help or -h anywhere with the usage and exit 0, even beside a bad option', () => {
    for (const argv of [['--help'], ['-h'], ['--runs', '3', '--help'], ['--nope', '-h']])
      expect(readBenchArgs(argv, USAGE, OPTIONS)).toEqual({ exit: 0, text: TEXT });
    // After `--` it is an argument, not a request for help.
    expect(readBenchArgs(['--', '--help'], USAGE, OPTIONS, { min: 0, max: 1 })).toEqual({
      values: { runs: '5' },
      positionals: ['--help'],
    });
  });

  it('answers an unknown option with what was wrong, the usage and exit 2', () => {
    const answer = readBenchArgs(['--nope'], USAGE, OPTIONS);
    expect(answer).toEqual({ exit: 2, text: expect.stringContaining("Unknown option '--nope'") });
    expect((answer as { text: string }).text.endsWith(`\n\n${TEXT}`)).toBe(true);
  });

  it('answers a malformed value with exit 2: a string option without its value, a value given to a flag', () => {
    expect(readBenchArgs(['--runs'], USAGE, OPTIONS)).toMatchObject({
      exit: 2,
      text: expect.stringContaining("'--runs <value>' argument missing"),
    });
    expect(readBenchArgs(['--verbose=yes'], USAGE, OPTIONS)).toMatchObject({ exit: 2, text: expect.stringContaining('--verbose') });
  });

  it('takes positionals only where the bench asks for them, as many as it allows', () => {
    expect(readBenchArgs(['file'], USAGE, OPTIONS)).toMatchObject({ exit: 2, text: expect.stringContaining("Unexpected argument 'file'") });
    const one = { min: 1, max: 1 };
    expect(readBenchArgs(['a.cpuprofile', '--runs', '2'], USAGE, OPTIONS, one)).toEqual({
      values: { runs: '2' },
      positionals: ['a.cpuprofile'],
    });
    expect(readBenchArgs([], USAGE, OPTIONS, one)).toEqual({
      exit: 2,
      text: `expected 1 argument(s) besides the options, got 0\n\n${TEXT}`,
    });
    expect(readBenchArgs(['a', 'b'], USAGE, OPTIONS, one)).toMatchObject({ exit: 2, text: expect.stringContaining('got 2') });
  });
});
