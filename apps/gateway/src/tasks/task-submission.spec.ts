import { parsePayload } from './task-submission.service.js';
import type { ApiError } from '#tern/service';

describe('task payload', () => {
  const status = (body: string | Buffer) => {
    try {
      parsePayload(Buffer.isBuffer(body) ? body : Buffer.from(body));
      return 202;
    } catch (e) {
      return (e as ApiError).getStatus();
    }
  };

  it("is any JSON value but null, the handler's one argument; an empty body is {}", () => {
    expect(parsePayload(Buffer.from('{"n": 1}'))).toEqual({ n: 1 });
    expect(parsePayload(Buffer.from('7'))).toBe(7);
    expect(parsePayload(Buffer.from('[1, "two"]'))).toEqual([1, 'two']);
    expect(parsePayload(Buffer.from('"text"'))).toBe('text');
    expect(parsePayload(Buffer.from('false'))).toBe(false);
    expect(parsePayload(Buffer.alloc(0))).toEqual({});
    expect(parsePayload(Buffer.from('  \n'))).toEqual({});
  });

  it('answers 400 for anything else and 413 beyond 512 KiB', () => {
    expect(status('not json')).toBe(400);
    expect(status('null')).toBe(400);
    expect(status('[1, "\\u0000"]')).toBe(400);
    expect(status(JSON.stringify({ x: 'y'.repeat(512 * 1024) }))).toBe(413);
  });

  it('answers 400 naming the field for a NUL or a lone surrogate, and for bytes that are not UTF-8', () => {
    expect(() => parsePayload(Buffer.from('{"prompt": "a\\u0000"}'))).toThrow(
      'the task payload: body field prompt contains a NUL character',
    );
    expect(status('{"prompt": "\\ud800"}')).toBe(400);
    expect(status(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]))).toBe(400);
  });
});
