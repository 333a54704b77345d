import { ImageError } from '../errors.js';
import { parseImageRef } from './image-ref.js';

describe('parseImageRef', () => {
  it.each([
    ['host', { kind: 'host' }],
    ['oci:/images/app:v2', { kind: 'oci', layout: '/images/app', tag: 'v2' }],
    ['oci:/images/app', { kind: 'oci', layout: '/images/app', tag: 'latest' }],
    ['oci:/a:b/app:v1', { kind: 'oci', layout: '/a:b/app', tag: 'v1' }],
    ['oci:/a:b/app', { kind: 'oci', layout: '/a:b/app', tag: 'latest' }],
    ['oci:rel/app:t', { kind: 'oci', layout: '/work/rel/app', tag: 't' }],
  ])('%s', (ref, parsed) => {
    expect(parseImageRef(ref, '/work')).toEqual(parsed);
  });

  it.each(['ubuntu:22.04', 'oci:', 'oci::tag', 'oci:/x:bad tag'])('rejects %s', (ref) => {
    expect(() => parseImageRef(ref)).toThrow(ImageError);
  });
});
