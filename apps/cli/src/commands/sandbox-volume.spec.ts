import { InvalidArgumentError } from 'commander';
import { volumeArgument } from './sandbox.js';

describe('tern sandbox create --volume', () => {
  it('reads NAME:/path and NAME:/path:ro, repeated', () => {
    const once = volumeArgument('data:/data');
    expect(once).toEqual([{ name: 'data', path: '/data' }]);
    expect(volumeArgument('models:/models:ro', once)).toEqual([
      { name: 'data', path: '/data' },
      { name: 'models', path: '/models', read_only: true },
    ]);
    expect(volumeArgument('data:/d:rw')).toEqual([{ name: 'data', path: '/d' }]);
  });

  it('refuses what names no volume or no absolute path', () => {
    for (const bad of ['data', 'data:relative', ':/data', 'data:/data:rx', 'data:/a:ro:x'])
      expect(() => volumeArgument(bad)).toThrow(InvalidArgumentError);
  });
});
