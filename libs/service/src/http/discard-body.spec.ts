import { PassThrough, Readable } from 'node:stream';
import { discardBody } from './discard-body.js';

describe('discardBody', () => {
  it('reads a refused body to its end, even one a reader paused half-way', async () => {
    const body = Readable.from([Buffer.alloc(10), Buffer.alloc(20), Buffer.alloc(30)]);
    body.once('data', () => body.pause());
    await new Promise((resolve) => setImmediate(resolve));
    expect(await discardBody(body, { maxBytes: 100, maxMs: 1000 })).toBe(true);
    expect(body.readableEnded).toBe(true);
  });

  it('gives up past maxBytes, and past maxMs on a sender that stalls', async () => {
    const endless = new Readable({
      read() {
        this.push(Buffer.alloc(1024));
      },
    });
    expect(await discardBody(endless, { maxBytes: 10_000, maxMs: 5000 })).toBe(false);
    const stalled = new PassThrough();
    stalled.write(Buffer.alloc(10));
    expect(await discardBody(stalled, { maxBytes: 10_000, maxMs: 50 })).toBe(false);
  });
});
