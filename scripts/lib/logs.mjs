import { closeSync, existsSync, openSync, readSync, renameSync, statSync } from 'node:fs';

const LEVELS = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** One pino JSON line made readable; other lines as they are. */
export function readable(line) {
  if (!line.startsWith('{')) return line;
  try {
    const o = JSON.parse(line);
    const time = typeof o.time === 'string' ? o.time.slice(11, 23) : o.time ? new Date(o.time).toISOString().slice(11, 23) : '';
    const err = o.err?.message ? ` — ${o.err.message}` : '';
    return `${time} ${LEVELS[o.level] ?? o.level ?? ''} ${o.context ? `[${o.context}] ` : ''}${o.msg ?? ''}${err}`.trim();
  } catch {
    return line;
  }
}

/** The last `lines` lines of a file (reads at most the last 64 KiB), made readable. */
export function tail(path, lines = 20) {
  if (!existsSync(path)) return '  (no log)';
  const size = statSync(path).size;
  const len = Math.min(size, 64 * 1024);
  const buf = Buffer.alloc(len);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, buf, 0, len, size - len);
  } finally {
    closeSync(fd);
  }
  const all = buf
    .toString('utf8')
    .split('\n')
    .filter((l) => l.trim());
  return (
    all
      .slice(-lines)
      .map((l) => `  ${readable(l)}`)
      .join('\n') || '  (empty log)'
  );
}

/** Keeps a log from growing without bound across runs: moves it to <file>.1 past `maxBytes`. */
export function rotate(path, maxBytes = 20 * 1024 * 1024) {
  try {
    if (statSync(path).size > maxBytes) renameSync(path, `${path}.1`);
  } catch {
    /* no log yet */
  }
}
