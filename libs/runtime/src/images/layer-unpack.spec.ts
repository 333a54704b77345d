import { layerTypeProblem, lowerLinks } from './layer-unpack.js';

describe('lowerLinks', () => {
  it('reads the links tar could not make, names as tar quotes them (C escapes, "…" and \'…\')', () => {
    const stderr = [
      `tar: "./usr/bin/b": Cannot hard link to './usr/bin/a': No such file or directory`,
      `tar: "./odd \\"name\\"\\n\\303\\251": Cannot hard link to './it\\'s: here': No such file or directory`,
      'tar: Exiting with failure status due to previous errors',
      '',
    ].join('\n');
    expect(lowerLinks(stderr)).toEqual({
      links: [
        { path: './usr/bin/b', target: './usr/bin/a' },
        { path: './odd "name"\né', target: "./it's: here" },
      ],
      other: [],
    });
  });

  it('keeps every other complaint, which fails the layer', () => {
    const other = [
      `tar: "./x": Cannot open: Permission denied`,
      `tar: "./b": Cannot hard link to './a': Permission denied`,
      'gzip: stdin: invalid compressed data--format violated',
    ];
    expect(lowerLinks(other.join('\n'))).toEqual({ links: [], other });
  });
});

describe('layerTypeProblem', () => {
  it('takes tar, gzip and zstd layers and names the ones it does not', () => {
    expect(layerTypeProblem('application/vnd.oci.image.layer.v1.tar+zstd')).toBeUndefined();
    expect(layerTypeProblem('application/vnd.docker.image.rootfs.diff.tar.gzip')).toBeUndefined();
    expect(layerTypeProblem('application/vnd.oci.image.layer.nondistributable.v1.tar+gzip')).toMatch(/is not one an agent unpacks/);
  });
});
