import { forwardable } from './headers.js';

describe('forwardable', () => {
  it('drops hop-by-hop headers, those Connection names, and the listed ones', () => {
    const out = forwardable(
      {
        Connection: 'keep-alive, X-Secret',
        'X-Secret': 's',
        'Transfer-Encoding': 'chunked',
        'Content-Type': 'text/plain',
        Accept: ['a', 'b'],
        authorization: 'Bearer t',
      },
      ['authorization'],
    );
    expect(out).toEqual({ 'content-type': 'text/plain', accept: 'a, b' });
  });
});
