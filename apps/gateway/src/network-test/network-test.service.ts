import { Injectable, PayloadTooLargeException, UnsupportedMediaTypeException } from '@nestjs/common';
import { Readable } from 'node:stream';
import { NETWORK_ECHO_MAX_BYTES, NETWORK_TEST_HTTP_MAX_BYTES, type NetworkEcho, type NetworkEchoReply } from '#tern/contracts';

const CHUNK = 64 * 1024;

/**
 * The control plane's half of an agent's network test: an echo over NATS and a sink and a
 * source over HTTP. Everything is bounded (NETWORK_ECHO_MAX_BYTES per echo,
 * NETWORK_TEST_HTTP_MAX_BYTES per HTTP transfer) so the routes cannot be turned into a way
 * to burn the gateway's bandwidth or memory.
 */
@Injectable()
export class NetworkTestService {
  /** Filler for echo replies, made once: the test measures the link, not the gateway's allocator. */
  private readonly echoFiller = 'x'.repeat(NETWORK_ECHO_MAX_BYTES);
  private readonly chunk = Buffer.alloc(CHUNK, 0x5a);

  echo(request: NetworkEcho): NetworkEchoReply {
    return { receivedBytes: request.data.length, data: this.echoFiller.slice(0, request.replyBytes) };
  }

  /**
   * Reads and throws away an upload, counting it. A declared length over the bound is refused
   * before anything is read; an undeclared (chunked) one is cut off as soon as it passes it.
   */
  async drain(body: unknown, contentType: string | undefined, contentLength: string | undefined): Promise<number> {
    if (body === undefined || body === null) return 0;
    if (!(body instanceof Readable)) {
      throw new UnsupportedMediaTypeException(`send the test body as application/octet-stream (got ${contentType ?? 'no content type'})`);
    }
    const declared = Number(contentLength);
    if (Number.isFinite(declared) && declared > NETWORK_TEST_HTTP_MAX_BYTES) {
      throw new PayloadTooLargeException(`the test upload is limited to ${NETWORK_TEST_HTTP_MAX_BYTES} bytes (content-length ${declared})`);
    }
    // Read by hand rather than with for-await, which would destroy the socket on the way out
    // and lose the 413; the rest is read (discardBody) before the answer goes.
    return new Promise<number>((resolve, reject) => {
      let received = 0;
      body.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received <= NETWORK_TEST_HTTP_MAX_BYTES) return;
        body.pause();
        body.removeAllListeners('data');
        reject(new PayloadTooLargeException(`the test upload is limited to ${NETWORK_TEST_HTTP_MAX_BYTES} bytes`));
      });
      body.once('end', () => resolve(received));
      body.once('error', reject);
    });
  }

  /** `bytes` of filler as a stream, a fixed chunk at a time (validated against the bound by the query DTO). */
  source(bytes: number): Readable {
    const chunk = this.chunk;
    return Readable.from(
      (function* () {
        for (let left = bytes; left > 0; left -= chunk.length) yield left >= chunk.length ? chunk : chunk.subarray(0, left);
      })(),
    );
  }
}
