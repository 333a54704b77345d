import { runningGateway } from '../support/gateway.js';
import http from 'node:http';

const ADMIN = `tern_${'b'.repeat(43)}`;
const MiB = 1024 * 1024;

interface Answer {
  status: number;
  body: { statusCode: number; error: string; message: string | string[] };
}

describe('gateway: bad input gets a 400 or 413 that says what to fix, never a 500 or a reset', () => {
  const gateway = runningGateway('badinput', ADMIN);

  /** node:http rather than fetch: paths go out byte for byte, and a reset fails the request. */
  const send = (method: string, path: string, body?: Buffer, type = 'application/json') =>
    new Promise<Answer>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: gateway.port,
          method,
          path,
          headers: { authorization: `Bearer ${ADMIN}`, ...(body ? { 'content-type': type, 'content-length': body.length } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()) as Answer['body'] }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  it('answers a NUL byte in a path segment with 400 naming the segment', async () => {
    const deployment = await send('GET', '/api/v1/deployments/%00');
    expect(deployment).toEqual({
      status: 400,
      body: { statusCode: 400, error: 'Bad Request', message: 'path segment 4 contains a NUL byte (%00); remove it' },
    });
    const reputation = await send('GET', '/api/v1/machines/%00/reputation');
    expect(reputation.status).toBe(400);
    expect(reputation.body.message).toBe('path segment 4 contains a NUL byte (%00); remove it');
  });

  it('answers a NUL or bytes that are not UTF-8 in a query value with 400 naming the parameter', async () => {
    const nul = await send('GET', '/api/v1/usage?from=2026-01-01&workspace=a%00');
    expect(nul.status).toBe(400);
    expect(nul.body.message).toBe('query parameter "workspace" contains a NUL byte (%00); remove it');
    const latin1 = await send('GET', '/api/v1/deployments?name=caf%E9');
    expect(latin1.status).toBe(400);
    expect(latin1.body.message).toMatch(/^query parameter "name" is not valid UTF-8/);
  });

  it('answers a JSON body with a NUL, a lone surrogate, bytes that are not UTF-8 or deep nesting with 400', async () => {
    const nul = await send('POST', '/api/v1/tokens', Buffer.from(JSON.stringify({ name: 'ci\u0000' })));
    expect(nul.status).toBe(400);
    expect(nul.body.message).toBe('body field name contains a NUL character (\\u0000); remove it');
    const nestedKey = await send('POST', '/api/v1/pools', Buffer.from('{"name":"gpu","labels":{"a\\u0000":"x"}}'));
    expect(nestedKey.status).toBe(400);
    expect(nestedKey.body.message).toMatch(/^a key in body field labels contains a NUL character/);
    const surrogate = await send('POST', '/api/v1/tokens', Buffer.from('{"name":"ci\\ud800"}'));
    expect(surrogate.status).toBe(400);
    expect(surrogate.body.message).toMatch(/lone UTF-16 surrogate/);
    const latin1 = await send('POST', '/api/v1/tokens', Buffer.from([...Buffer.from('{"name":"caf'), 0xe9, ...Buffer.from('"}')]));
    expect(latin1.status).toBe(400);
    expect(latin1.body.message).toBe('request body is not valid UTF-8; send JSON as UTF-8 text');
    const deep = await send('POST', '/api/v1/tokens', Buffer.from('['.repeat(10_000) + ']'.repeat(10_000)));
    expect(deep.status).toBe(400);
    expect(deep.body.message).toMatch(/nests deeper than 64 levels/);
  });

  it('answers bytes sent where a route takes JSON with 415, and the gateway keeps serving', async () => {
    const binary = await send('POST', '/api/v1/tokens', Buffer.from('{"name":"ci"}'), 'application/octet-stream');
    expect(binary.status).toBe(415);
    expect(binary.body.message).toMatch(/takes a JSON body/);
    expect((await send('GET', '/api/v1/workspace')).status).toBe(200);
  });

  it('answers an oversize body with a 413 the client reads, on the API, an endpoint and a code upload', async () => {
    const json = await send('POST', '/api/v1/tokens', Buffer.alloc(17 * MiB, 0x20));
    expect(json.status).toBe(413);
    const endpoint = await send('POST', '/endpoint/nowhere', Buffer.alloc(17 * MiB, 0x20));
    expect(endpoint.status).toBe(413);
    expect(endpoint.body.message).toMatch(/over the 16 MiB limit for endpoints/);
    const bundle = await send('PUT', `/api/v1/code/sha256:${'a'.repeat(64)}`, Buffer.alloc(65 * MiB), 'application/gzip');
    expect(bundle.status).toBe(413);
    expect(bundle.body.message).toMatch(/code bundles are limited to 64 MiB/);
  });
});
