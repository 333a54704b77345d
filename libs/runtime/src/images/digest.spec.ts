import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImageError } from '../errors.js';
import { requireSha256Hex, sha256Hex } from './digest.js';
import { blobPath, resolveManifest } from './oci-image.js';

const HEX = 'a'.repeat(64);

describe('sha256Hex', () => {
  it('accepts sha256: and 64 lower-case hex digits', () => {
    expect(sha256Hex(`sha256:${HEX}`)).toBe(HEX);
  });

  it.each([
    ['a traversal', '../'],
    ['a traversal in the hex', 'sha256:../../x'],
    ['a traversal in the algorithm', `../../etc:${HEX}`],
    ['a traversal after a valid hex', `sha256:${HEX}/../../x`],
    ['upper case', `sha256:${HEX.toUpperCase()}`],
    ['an upper-case algorithm', `SHA256:${HEX}`],
    ['a short hex', `sha256:${HEX.slice(1)}`],
    ['a long hex', `sha256:${HEX}0`],
    ['another algorithm', `sha512:${'a'.repeat(128)}`],
    ['no algorithm', HEX],
    ['a trailing newline', `sha256:${HEX}\n`],
    ['not a string', 42],
  ])('refuses %s', (_why, digest) => {
    expect(sha256Hex(digest)).toBeUndefined();
    expect(() => requireSha256Hex('oci:/x', digest)).toThrow(ImageError);
  });
});

describe('oci layouts', () => {
  it('builds a blob path only from a valid digest', () => {
    expect(blobPath('oci:/l', '/l', `sha256:${HEX}`)).toBe(`/l/blobs/sha256/${HEX}`);
    expect(() => blobPath('oci:/l', '/l', '../../etc:passwd')).toThrow('is not sha256:<64 lower-case hex digits>');
  });

  it('refuses an index whose digest would leave the layout, before reading any blob', async () => {
    const layout = mkdtempSync(join(tmpdir(), 'tern-layout-'));
    mkdirSync(join(layout, 'blobs', 'sha256'), { recursive: true });
    const index = {
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.index.v1+json',
          digest: 'sha256:../../../../etc/passwd',
          annotations: { 'org.opencontainers.image.ref.name': 'latest' },
        },
      ],
    };
    writeFileSync(join(layout, 'index.json'), JSON.stringify(index));
    try {
      await expect(resolveManifest(`oci:${layout}`, layout, 'latest')).rejects.toThrow('refusing to build a path from it');
    } finally {
      rmSync(layout, { recursive: true, force: true });
    }
  });
});
