import { PayloadTooLargeException, UnsupportedMediaTypeException } from '@nestjs/common';
import { Readable } from 'node:stream';
import { NETWORK_ECHO_MAX_BYTES, NETWORK_TEST_HTTP_MAX_BYTES } from '#tern/contracts';
import { NetworkTestService } from './network-test.service.js';

async function count(stream: Readable): Promise<number> {
  let n = 0;
  for await (const chunk of stream) n += (chunk as Buffer).length;
  return n;
}

describe('network test (gateway side)', () => {
  const service = new NetworkTestService();

  it('echoes: counts what came up, sends back as many bytes as asked', () => {
    expect(service.echo({ data: 'abc', replyBytes: 5 })).toEqual({ receivedBytes: 3, data: 'xxxxx' });
    expect(service.echo({ data: '', replyBytes: NETWORK_ECHO_MAX_BYTES }).data).toHaveLength(NETWORK_ECHO_MAX_BYTES);
  });

  it('drains an upload and counts it', async () => {
    const body = Readable.from([Buffer.alloc(1000), Buffer.alloc(24)]);
    expect(await service.drain(body, 'application/octet-stream', '1024')).toBe(1024);
    expect(await service.drain(undefined, undefined, undefined)).toBe(0);
  });

  it('refuses a declared length over the bound before reading, and an undeclared one once past it', async () => {
    const untouched = Readable.from([Buffer.alloc(10)]);
    await expect(service.drain(untouched, 'application/octet-stream', String(NETWORK_TEST_HTTP_MAX_BYTES + 1))).rejects.toBeInstanceOf(
      PayloadTooLargeException,
    );
    const endless = new Readable({
      read() {
        this.push(Buffer.alloc(1024 * 1024));
      },
    });
    await expect(service.drain(endless, 'application/octet-stream', undefined)).rejects.toThrow(
      `the test upload is limited to ${NETWORK_TEST_HTTP_MAX_BYTES} bytes`,
    );
  });

  it('wants a binary body', async () => {
    await expect(service.drain({ a: 1 }, 'application/json', '7')).rejects.toBeInstanceOf(UnsupportedMediaTypeException);
  });

  it('sources exactly the bytes asked for', async () => {
    expect(await count(service.source(0))).toBe(0);
    expect(await count(service.source(200_000))).toBe(200_000);
  });
});
