/** Names a shell's processes by its tunnel, so a resize finds that shell's pty inside the sandbox. */
export const SHELL_ID_ENV = 'TERN_SHELL_ID';

/**
 * Resizes a shell's pty from inside the sandbox (`sh -c SCRIPT sh <tunnel id> <cols> <rows>`):
 * the first process started with that shell's id whose stdin is a pty (the shell `script` runs
 * on it) names the pty, and `stty` sets its size, which sends SIGWINCH to what runs in the
 * foreground there. Exits 44 when no such shell runs.
 */
export const RESIZE_SCRIPT = [
  'for p in /proc/[0-9]*; do',
  `  tr '\\0' '\\n' 2>/dev/null < "$p/environ" | grep -qx "${SHELL_ID_ENV}=$1" || continue`,
  '  t=$(readlink "$p/fd/0" 2>/dev/null)',
  '  case "$t" in /dev/pts/*) exec stty -F "$t" cols "$2" rows "$3";; esac',
  'done',
  'exit 44',
].join('\n');
