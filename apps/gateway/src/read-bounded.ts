import type { Readable } from 'node:stream';

/**
 * Reads a raw request body of at most `limit` bytes. By hand (not for-await, which would destroy
 * the socket and lose the 413); the rest is drained before the answer (installRequestIntake).
 */
export function readBounded(body: Readable, limit: number, tooLarge: (detail: string) => Error): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    body.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received <= limit) return void chunks.push(chunk);
      body.pause();
      body.removeAllListeners('data');
      reject(tooLarge(`more than ${limit} bytes sent`));
    });
    body.once('end', () => resolve(Buffer.concat(chunks)));
    body.once('error', reject);
  });
}
