export type Key = 'up' | 'down' | 'logs' | 'back' | 'quit';

/** Turns a raw-mode stdin chunk into the dashboard's keys; anything else is ignored. */
export function parseKeys(chunk: string): Key[] {
  const keys: Key[] = [];
  for (let i = 0; i < chunk.length; i++) {
    const rest = chunk.slice(i);
    if (rest.startsWith('\x1b[A') || rest.startsWith('\x1bOA')) {
      keys.push('up');
      i += 2;
    } else if (rest.startsWith('\x1b[B') || rest.startsWith('\x1bOB')) {
      keys.push('down');
      i += 2;
    } else if (rest.startsWith('\x1b[')) {
      // Another escape sequence (other arrows, function keys): skip it whole.
      const end = rest.slice(2).search(/[@-~]/);
      i += end < 0 ? rest.length : end + 2;
    } else {
      const c = chunk[i];
      if (c === '\x03' || c === 'q' || c === 'Q') keys.push('quit');
      else if (c === 'l' || c === 'L' || c === '\r') keys.push('logs');
      else if (c === '\x1b') keys.push('back');
      else if (c === 'k') keys.push('up');
      else if (c === 'j') keys.push('down');
    }
  }
  return keys;
}
