import { access } from 'node:fs/promises';

/** Whether a path exists (and this process may see it). */
export function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
