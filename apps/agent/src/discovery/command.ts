import { execa } from 'execa';

/**
 * Runs a probe command and returns its stdout, or undefined when the binary is missing,
 * exits non-zero or overruns its time: to discovery a missing tool means "none of those".
 */
export type CommandRunner = (file: string, args: string[], opts?: { timeoutMs?: number }) => Promise<string | undefined>;

export const runCommand: CommandRunner = async (file, args, opts = {}) => {
  const result = await execa(file, args, { timeout: opts.timeoutMs ?? 10_000, reject: false, stdin: 'ignore' });
  if (result.failed || result.exitCode !== 0) return undefined;
  return result.stdout;
};
