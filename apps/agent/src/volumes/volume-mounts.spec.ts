import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { walkCopy } from './volume-mounts.js';

describe('walkCopy', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tern-walk-copy-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('lists regular files by volume path and names what a volume does not keep, with why', async () => {
    await mkdir(join(dir, 'models/llm'), { recursive: true });
    await writeFile(join(dir, 'models/llm/a.bin'), 'a');
    await writeFile(join(dir, 'top.txt'), 'top');
    await mkdir(join(dir, 'empty/deeper'), { recursive: true });
    await mkdir(join(dir, 'kept'));
    await writeFile(join(dir, 'kept/file'), 'x');
    await symlink('/etc/passwd', join(dir, 'host-link'));
    await symlink('/etc', join(dir, 'models/dir-link'));
    execFileSync('mkfifo', [join(dir, 'pipe')]);

    const walked = await walkCopy(dir);
    expect(walked.files).toEqual(['kept/file', 'models/llm/a.bin', 'top.txt']);
    expect(walked.skipped).toEqual([
      'empty/deeper/: an empty directory (volumes keep files: put one in it to keep it)',
      'host-link: a symbolic link (volumes keep regular files only; copy the file instead)',
      'models/dir-link: a symbolic link (volumes keep regular files only; copy the file instead)',
      'pipe: not a regular file (volumes keep regular files only)',
    ]);
  });

  it('is empty for a copy that is gone', async () => {
    expect(await walkCopy(join(dir, 'missing'))).toEqual({ files: [], skipped: [] });
  });
});
