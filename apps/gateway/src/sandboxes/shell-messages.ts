import type { ShellResize } from '#tern/contracts';

/** A text message on a shell's WebSocket: the end of the input, or the terminal's new size. */
export type ShellMessage = { eof: true } | { resize: ShellResize };

const dimension = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 1000;

/**
 * Reads a shell WebSocket's text message: `{"eof":true}` or `{"resize":{"cols":N,"rows":M}}`
 * (1 to 1000 each). Anything else is undefined: the caller ignores it, as a terminal ignores an
 * escape sequence it does not know.
 */
export function shellMessage(text: string): ShellMessage | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const m = value as { eof?: unknown; resize?: { cols?: unknown; rows?: unknown } };
  if (m.eof === true) return { eof: true };
  const size = m.resize;
  if (typeof size === 'object' && size !== null && dimension(size.cols) && dimension(size.rows))
    return { resize: { cols: size.cols, rows: size.rows } };
  return undefined;
}
