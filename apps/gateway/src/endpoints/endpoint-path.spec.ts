import { parseEndpointUrl, parseVersion, pathNotice, pinnedVersion } from './endpoint-path.js';

describe('parseEndpointUrl', () => {
  it.each([
    ['/endpoint/echo', { name: 'echo', version: undefined, path: '/' }],
    ['/endpoint/echo/', { name: 'echo', version: undefined, path: '/' }],
    ['/endpoint/echo?x=1', { name: 'echo', version: undefined, path: '/?x=1' }],
    ['/endpoint/echo@3', { name: 'echo', version: 3, path: '/' }],
    ['/endpoint/echo%403/a', { name: 'echo', version: 3, path: '/a' }],
    ['/endpoint/echo@3?x=1', { name: 'echo', version: 3, path: '/?x=1' }],
    ['/endpoint/echo@3/a/b?q=v2', { name: 'echo', version: 3, path: '/a/b?q=v2' }],
    // The server's own paths, whatever they look like: the OpenAI client's /v1 above all.
    ['/endpoint/llm/v1/chat/completions', { name: 'llm', version: undefined, path: '/v1/chat/completions' }],
    ['/endpoint/echo/v3', { name: 'echo', version: undefined, path: '/v3' }],
    ['/endpoint/llm@2/v1/models', { name: 'llm', version: 2, path: '/v1/models' }],
    ['/endpoint/echo/generate/v2', { name: 'echo', version: undefined, path: '/generate/v2' }],
    ['/endpoint/echo//a', { name: 'echo', version: undefined, path: '//a' }],
  ])('%s', (url, target) => {
    expect(parseEndpointUrl(url)).toEqual(target);
  });

  it('marks a pin that is not a version number with NaN', () => {
    for (const url of ['/endpoint/echo@', '/endpoint/echo@0', '/endpoint/echo@v3', '/endpoint/echo@1x/a', '/endpoint/echo@01'])
      expect(parseEndpointUrl(url)?.version).toBeNaN();
  });

  it('refuses what is not an endpoint URL', () => {
    expect(parseEndpointUrl('/endpoint/')).toBeUndefined();
    expect(parseEndpointUrl('/endpoint/@3')).toBeUndefined();
    expect(parseEndpointUrl('/endpoint/%E0%A4%A')).toBeUndefined();
    expect(parseEndpointUrl('/api/v1/x')).toBeUndefined();
  });
});

describe('parseVersion', () => {
  it('reads a header value', () => {
    expect(parseVersion(undefined)).toBeUndefined();
    expect(parseVersion('')).toBeUndefined();
    expect(parseVersion('12')).toBe(12);
    expect(parseVersion('v12')).toBeNaN();
    expect(parseVersion('0')).toBeNaN();
  });
});

describe('pathNotice', () => {
  const versions = new Set([1, 2, 3]);
  const exists = (v: number) => versions.has(v);
  it('names the pin form where an old pin now reaches another version, and says nothing otherwise', () => {
    expect(pathNotice('llm', '/v1/models', 3, exists)).toBe(
      '"/v1" was passed to the server as part of its path and version 3 answered; pin version 1 with /endpoint/llm@1/... or the x-tern-version header',
    );
    expect(pathNotice('echo', '/v2', 3, exists)).toMatch(/^"\/v2" was passed/);
    expect(pathNotice('echo', '/v2?x=1', 3, exists)).toMatch(/^"\/v2" was passed/);
    // The version the old form named answered anyway, or never existed: nothing changed.
    expect(pathNotice('echo', '/v3/x', 3, exists)).toBeUndefined();
    expect(pathNotice('echo', '/v7/x', 3, exists)).toBeUndefined();
    expect(pathNotice('echo', '/video', 3, exists)).toBeUndefined();
    expect(pathNotice('echo', '/', 3, exists)).toBeUndefined();
  });
});

describe('pinnedVersion', () => {
  const target = (version?: number) => ({ name: 'llm', version, path: '/' });
  it('takes the pin from the URL or the header, the same from both', () => {
    expect(pinnedVersion(target(), undefined)).toEqual({ version: undefined });
    expect(pinnedVersion(target(3), undefined)).toEqual({ version: 3 });
    expect(pinnedVersion(target(), ' 4 ')).toEqual({ version: 4 });
    expect(pinnedVersion(target(4), '4')).toEqual({ version: 4 });
  });
  it('says what to fix otherwise', () => {
    expect(pinnedVersion(target(3), '4')).toEqual({ problem: 'the URL pins version 3 and x-tern-version says 4: give one' });
    expect(pinnedVersion(target(NaN), undefined)).toEqual({
      problem: 'not a version: pin a version as /endpoint/llm@<N>/… or with x-tern-version: <N>, N a whole number from 1',
    });
    expect(pinnedVersion(target(), 'latest')).toMatchObject({ problem: expect.stringMatching(/^not a version/) });
    expect(pinnedVersion(target(), ['1', '2'])).toMatchObject({ problem: expect.stringMatching(/given 2 times/) });
  });
});
