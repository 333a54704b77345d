import { bodyTextProblem, jsonValueProblem, MAX_JSON_DEPTH, pathEscapeProblem, urlInputProblem } from './bad-input.js';

describe('urlInputProblem', () => {
  it('names the path segment or query parameter with a NUL byte or bytes that are not UTF-8', () => {
    expect(urlInputProblem('/api/v1/deployments/%00')).toBe('path segment 4 contains a NUL byte (%00); remove it');
    expect(urlInputProblem('/api/v1/machines/a%00b/reputation')).toBe('path segment 4 contains a NUL byte (%00); remove it');
    expect(urlInputProblem('/x/%FF')).toMatch(/^path segment 2 is not valid UTF-8/);
    expect(urlInputProblem('/x/%ED%A0%80')).toMatch(/not valid UTF-8/); // an encoded surrogate
    expect(urlInputProblem('/x?limit=1&from=%00')).toBe('query parameter "from" contains a NUL byte (%00); remove it');
    expect(urlInputProblem('/x?%C0%80=1')).toMatch(/^a query parameter name is not valid UTF-8/);
  });

  it('lets UTF-8, plain text and stray percent signs through', () => {
    for (const url of ['/', '/api/v1/deployments/caf%C3%A9', '/x?q=%F0%9F%98%80&flag', '/x/%zz?a=%', '/x?a=b=c&&']) {
      expect(urlInputProblem(url)).toBeUndefined();
    }
  });
});

describe('pathEscapeProblem', () => {
  it('names the path segment with a % that starts no escape, and leaves the query alone', () => {
    expect(pathEscapeProblem('/api/v1/deployments/%zz')).toBe(
      'path segment 4 has a % that starts no percent escape ("%zz"); write a literal % as %25',
    );
    expect(pathEscapeProblem('/x/a%2')).toBe('path segment 2 has a % that starts no percent escape ("%2"); write a literal % as %25');
    expect(pathEscapeProblem('/x/50%')).toMatch(/^path segment 2 has a % that starts no percent escape \("%"\)/);
    for (const url of ['/', '/x/%25/caf%C3%A9', '/x?a=%zz&b=%']) expect(pathEscapeProblem(url)).toBeUndefined();
  });
});

describe('jsonValueProblem', () => {
  it('finds a NUL or a lone surrogate in keys and strings at any depth, naming where', () => {
    expect(jsonValueProblem({ name: 'a\u0000' })).toBe('body field name contains a NUL character (\\u0000); remove it');
    expect(jsonValueProblem({ spec: { env: [{ value: 'x\ud800' }] } })).toMatch(
      /^body field spec\.env\[0\]\.value contains a lone UTF-16 surrogate/,
    );
    expect(jsonValueProblem({ labels: { 'k\u0000': 1 } })).toMatch(/^a key in body field labels contains a NUL/);
    expect(jsonValueProblem('\udc00')).toMatch(/^body contains a lone/);
  });

  it('refuses nesting past the bound without recursing', () => {
    let deep: unknown = [];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(jsonValueProblem(deep)).toBe(`body nests deeper than ${MAX_JSON_DEPTH} levels; flatten it`);
  });

  it('lets well-formed values through, surrogate pairs included', () => {
    expect(jsonValueProblem({ name: 'gpu 😀', n: 1e308, list: [null, true, 'x'], nested: { a: { b: 'c' } } })).toBeUndefined();
  });
});

describe('bodyTextProblem', () => {
  it('refuses NUL bytes and bytes that are not UTF-8', () => {
    expect(bodyTextProblem(Buffer.from('{"a":"b"}'))).toBeUndefined();
    expect(bodyTextProblem(Buffer.from('{"a":"é"}'))).toBeUndefined();
    expect(bodyTextProblem(Buffer.from([0x7b, 0x00, 0x7d]))).toMatch(/NUL byte/);
    expect(bodyTextProblem(Buffer.from([0x22, 0xff, 0x22]))).toMatch(/not valid UTF-8/);
  });
});
