import { ChunkQueue } from './chunk-queue.js';
import { errorHeaders, headerJson, InvokeError } from './protocol.js';

describe('ChunkQueue', () => {
  it('yields queued chunks, then ends', async () => {
    let closed = 0;
    const q = new ChunkQueue(() => closed++);
    q.push(Buffer.from('a'));
    setTimeout(() => {
      q.push(Buffer.from('b'));
      q.end();
    }, 5);
    const out: string[] = [];
    for await (const c of q) out.push(Buffer.from(c).toString());
    expect(out).toEqual(['a', 'b']);
    expect(closed).toBe(1);
  });

  it('delivers the chunks before an error, then throws it', async () => {
    const q = new ChunkQueue(() => undefined);
    q.push(Buffer.from('a'));
    q.fail(new InvokeError(502, 'gone'));
    const out: string[] = [];
    await expect(
      (async () => {
        for await (const c of q) out.push(Buffer.from(c).toString());
      })(),
    ).rejects.toMatchObject({ code: 502 });
    expect(out).toEqual(['a']);
  });

  it('tells the owner when the reader stops early', async () => {
    let closed = 0;
    const q = new ChunkQueue(() => closed++);
    q.push(Buffer.from('a'));
    q.push(Buffer.from('b'));
    for await (const _ of q) break;
    expect(closed).toBe(1);
  });

  it('with a flow, asks the producer to pause past the high-water mark and resumes it once read below', async () => {
    let resumed = 0;
    const q = new ChunkQueue(() => undefined, { highWaterBytes: 4, resume: () => resumed++ });
    expect(q.push(Buffer.from('abc'))).toBe(true);
    expect(q.push(Buffer.from('def'))).toBe(false);
    q.end();
    const seen: string[] = [];
    for await (const c of q) seen.push(Buffer.from(c).toString());
    expect(seen).toEqual(['abc', 'def']);
    expect(resumed).toBe(1);
  });
});

describe('protocol headers', () => {
  it('keeps header JSON on one ASCII line', () => {
    const json = headerJson({ a: 'zoë\r\nx' });
    expect(json).toMatch(/^[\x20-\x7e]+$/);
    expect(JSON.parse(json)).toEqual({ a: 'zoë\r\nx' });
  });

  it('makes an error end with a one-line message', () => {
    const h = errorHeaders(3, 502, 'bad\nthing');
    expect([h.get('Tern-Seq'), h.get('Tern-End'), h.get('Tern-Error'), h.get('Tern-Error-Code')]).toEqual(['3', '1', 'bad thing', '502']);
  });
});
