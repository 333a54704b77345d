/**
 * A path inside a volume in its stored form: relative to the volume's root, `/`-separated,
 * without `.`, `..` or empty segments. A leading `/` means the volume's root (`/models/a.bin`
 * is `models/a.bin`), never the machine's. Returns the problem, in words, when there is one.
 */
export function volumePath(raw: string, { rootAllowed = false } = {}): { path: string } | { problem: string } {
  if (raw.includes('\0')) return { problem: 'a volume path may not hold a NUL byte' };
  const segments = raw.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '..')) return { problem: `path "${raw}" escapes the volume: ".." is not allowed` };
  if (segments.some((s) => s === '.')) return { problem: `path "${raw}" holds a "." segment: write the path without it` };
  const path = segments.join('/');
  if (!path && !rootAllowed) return { problem: 'give a path of a file inside the volume (e.g. models/weights.bin)' };
  if (path.length > 4096) return { problem: 'a volume path is at most 4096 characters' };
  return { path };
}

/** The immediate entries below `dir` ('' for the root) of a sorted list of file paths: files and directories. */
export function entriesBelow<F extends { path: string }>(
  files: readonly F[],
  dir: string,
): { files: F[]; directories: { path: string; files: number }[] } {
  const prefix = dir ? `${dir}/` : '';
  const direct: F[] = [];
  const directories = new Map<string, number>();
  for (const f of files) {
    if (!f.path.startsWith(prefix)) continue;
    const rest = f.path.slice(prefix.length);
    const slash = rest.indexOf('/');
    if (slash < 0) direct.push(f);
    else {
      const d = `${prefix}${rest.slice(0, slash)}`;
      directories.set(d, (directories.get(d) ?? 0) + 1);
    }
  }
  return { files: direct, directories: [...directories].map(([path, files]) => ({ path, files })) };
}
