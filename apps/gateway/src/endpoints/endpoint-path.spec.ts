import { parseEndpointUrl } from './endpoint-path.js';

describe('parseEndpointUrl', () => {
  it.each([
    ['/endpoint/echo', { name: 'echo', version: undefined, path: '/' }],
    ['/endpoint/echo/', { name: 'echo', version: undefined, path: '/' }],
    ['/endpoint/echo?x=1', { name: 'echo', version: undefined, path: '/?x=1' }],
    ['/endpoint/echo/v3', { name: 'echo', version: 3, path: '/' }],
    ['/endpoint/echo/v3/a/b?q=v2', { name: 'echo', version: 3, path: '/a/b?q=v2' }],
    ['/endpoint/echo/generate/v2', { name: 'echo', version: undefined, path: '/generate/v2' }],
  ])('%s', (url, target) => {
    expect(parseEndpointUrl(url)).toEqual(target);
  });

  it('refuses what is not an endpoint URL', () => {
    expect(parseEndpointUrl('/endpoint/')).toBeUndefined();
    expect(parseEndpointUrl('/api/v1/x')).toBeUndefined();
  });
});
