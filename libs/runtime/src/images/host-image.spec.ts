import { lstat, mkdir, mkdtemp, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostImageRecipe, prepareHostImage, recipeDigest } from './host-image.js';

describe('host image', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tern-host-image-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('binds /usr and what node needs read-only, on an otherwise empty rootfs', async () => {
    const image = await prepareHostImage(dir);
    expect(image.digest).toBe(recipeDigest(await hostImageRecipe()));
    expect(image.mounts).toContainEqual({ destination: '/usr', type: 'bind', source: '/usr', options: ['rbind', 'ro', 'nosuid', 'nodev'] });
    for (const m of image.mounts) expect(m.options).toContain('ro');
    expect(image.mounts.map((m) => m.source)).not.toContain('/etc/ssl/private');
    expect(await readFile(join(image.rootfs, 'etc/passwd'), 'utf8')).toMatch(/^nobody:x:65534:65534:/m);
    expect((await stat(join(image.rootfs, 'tmp'))).mode & 0o7777).toBe(0o1777);
    const bin = await lstat('/bin');
    if (bin.isSymbolicLink()) expect(await readlink(join(image.rootfs, 'bin'))).toBe(await readlink('/bin'));
    expect(image.sharesHostUsr).toBe(true);
  });

  it('is built once per recipe', async () => {
    const a = await prepareHostImage(dir);
    const before = (await stat(join(a.rootfs, '..', 'recipe.json'))).mtimeMs;
    const b = await prepareHostImage(dir);
    expect(b.rootfs).toBe(a.rootfs);
    expect((await stat(join(b.rootfs, '..', 'recipe.json'))).mtimeMs).toBe(before);
  });

  it('binds a node installed outside /usr and puts it on PATH', async () => {
    const prefix = join(dir, 'nvm/versions/node/v20');
    await mkdir(join(prefix, 'bin'), { recursive: true });
    await writeFile(join(prefix, 'bin/node'), '');
    const recipe = await hostImageRecipe({ nodePath: join(prefix, 'bin/node') });
    expect(recipe.dirs).toContain(prefix);
    expect(recipe.path).toEqual([join(prefix, 'bin')]);
  });
});
