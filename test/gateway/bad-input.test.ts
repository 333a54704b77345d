import { createUser } from '@nats-io/nkeys';
import { runningGateway } from '../support/gateway.js';
import http from 'node:http';
import net from 'node:net';

const ADMIN = `tern_${'b'.repeat(43)}`;
const MiB = 1024 * 1024;

interface Answer {
  status: number;
  body: { statusCode: number; error: string; message: string | string[] };
}

describe('gateway: bad input gets a 400 or 413 that says what to fix, never a 500 or a reset', () => {
  const gateway = runningGateway('badinput', ADMIN);

  /** node:http rather than fetch: paths go out byte for byte, and a reset fails the request. */
  const send = (method: string, path: string, body?: Buffer, type = 'application/json', headers: Record<string, string> = {}) =>
    new Promise<Answer>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: gateway.port,
          method,
          path,
          headers: {
            authorization: `Bearer ${ADMIN}`,
            ...(body ? { 'content-type': type, 'content-length': body.length } : {}),
            ...headers,
          },
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

  /**
   * The request line and headers as bytes, then the body, on a socket of its own, the way a
   * client that writes its whole request before reading does: the answer, or the socket error.
   */
  const sendRaw = (head: Buffer, body: Buffer) =>
    new Promise<{ statusLine: string; body: string; error?: string }>((resolve) => {
      const socket = net.connect(gateway.port, '127.0.0.1');
      const chunks: Buffer[] = [];
      let error: string | undefined;
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
      socket.on('close', () => {
        const [statusLine = '', ...rest] = Buffer.concat(chunks).toString('latin1').split('\r\n');
        resolve({ statusLine, body: rest.slice(rest.indexOf('') + 1).join('\r\n'), ...(error ? { error } : {}) });
      });
      socket.write(head);
      socket.end(body);
    });

  it('answers a malformed percent escape in the path with 400 naming the segment, and reads a 20 MB body first instead of resetting', async () => {
    const big = Buffer.alloc(20 * MiB, 0x20);
    for (const close of [{}, { connection: 'close' }] as Record<string, string>[]) {
      const stray = await send('POST', '/api/v1/deployments/%zz', big, 'application/json', close);
      expect(stray).toEqual({
        status: 400,
        body: {
          statusCode: 400,
          error: 'Bad Request',
          message: 'path segment 4 has a % that starts no percent escape ("%zz"); write a literal % as %25',
        },
      });
      const latin1 = await send('PUT', '/api/v1/secrets/caf%E9', big, 'application/json', close);
      expect(latin1.status).toBe(400);
      expect(latin1.body.message).toMatch(/^path segment 4 is not valid UTF-8 once percent-decoded/);
    }
    const long = await send('GET', `/api/v1/deployments/${'x'.repeat(101)}`);
    expect(long.status).toBe(414);
    expect(long.body.message).toBe('a path parameter is over 100 characters; no id or name the API takes is that long');
  });

  it('answers a request line with a byte a URL may not hold with 400, and reads a 20 MB body first instead of resetting', async () => {
    const line = Buffer.concat([Buffer.from('POST /api/v1/deployments/caf'), Buffer.from([0xe9]), Buffer.from(' HTTP/1.1\r\n')]);
    const head = Buffer.concat([
      line,
      Buffer.from(`Host: x\r\nAuthorization: Bearer ${ADMIN}\r\nContent-Type: application/json\r\nContent-Length: ${20 * MiB}\r\n\r\n`),
    ]);
    const answer = await sendRaw(head, Buffer.alloc(20 * MiB, 0x20));
    expect(answer.error).toBeUndefined();
    expect(answer.statusLine).toBe('HTTP/1.1 400 Bad Request');
    expect(JSON.parse(answer.body)).toMatchObject({ message: expect.stringMatching(/a byte a URL may not .* percent-encode it/) });
    expect((await send('GET', '/api/v1/workspace')).status).toBe(200);
  });

  it('refuses a NATS user key with a bad checksum with 400, and records no user', async () => {
    const key = createUser().getPublicKey();
    const corrupted = key.slice(0, 10) + (key[10] === 'A' ? 'B' : 'A') + key.slice(11);
    const answer = await send(
      'POST',
      '/api/v1/nats/users',
      Buffer.from(JSON.stringify({ name: 'ci', allow: ['events'], publicKey: corrupted })),
    );
    expect(answer.status).toBe(400);
    expect(answer.body.message).toEqual([expect.stringMatching(/^publicKey is not an nkey user public key: its checksum does not match/)]);
    expect(await send('GET', '/api/v1/nats/users')).toMatchObject({ status: 200, body: [] });
    const good = await send('POST', '/api/v1/nats/users', Buffer.from(JSON.stringify({ name: 'ci', allow: ['events'], publicKey: key })));
    expect(good.status).toBe(201);
  });

  it('refuses a registration whose fields are over their bounds with 400 naming the field, not a 503 to retry', async () => {
    const inventory = {
      hostname: 'h',
      cpu: { model: 'c', cores: 1, threads: 1 },
      memoryBytes: 1,
      disks: [],
      os: { platform: 'linux', distro: 'd', release: 'r', kernel: 'k', arch: 'x64' },
      networkInterfaces: [],
      gpus: [],
    };
    const register = (over: object) =>
      send(
        'POST',
        '/api/v1/machine/register',
        Buffer.from(JSON.stringify({ machineId: 'm-big', pool: 'default', agentVersion: '1', inventory, ...over })),
      );
    const version = await register({ agentVersion: 'v'.repeat(MiB) });
    expect(version.status).toBe(400);
    expect(version.body.message).toEqual(['agentVersion must be shorter than or equal to 64 characters']);
    const host = await register({ inventory: { ...inventory, hostname: 'h'.repeat(MiB) } });
    expect(host.status).toBe(400);
    expect(host.body.message).toEqual(['inventory.hostname must be shorter than or equal to 253 characters']);
    const key = createUser().getPublicKey();
    const badKey = await register({ natsPublicKey: key.slice(0, 10) + (key[10] === 'A' ? 'B' : 'A') + key.slice(11) });
    expect(badKey.status).toBe(400);
    // Nothing was created on the way: the machine id is still free.
    expect((await send('GET', '/api/v1/machines/m-big')).status).toBe(404);
  });
});
