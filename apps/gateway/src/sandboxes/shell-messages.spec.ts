import { shellMessage } from './shell-messages.js';

describe('shellMessage', () => {
  it('reads the end of the input and a resize', () => {
    expect(shellMessage('{"eof":true}')).toEqual({ eof: true });
    expect(shellMessage(' { "eof" : true } ')).toEqual({ eof: true });
    expect(shellMessage('{"resize":{"cols":132,"rows":40}}')).toEqual({ resize: { cols: 132, rows: 40 } });
    expect(shellMessage('{"resize":{"cols":1,"rows":1000,"extra":1}}')).toEqual({ resize: { cols: 1, rows: 1000 } });
  });

  it('ignores what is neither, or a size out of 1..1000', () => {
    for (const text of [
      'ls\n',
      '',
      'null',
      '42',
      '{"eof":false}',
      '{"eof":"true"}',
      '{"resize":{"cols":0,"rows":24}}',
      '{"resize":{"cols":80,"rows":1001}}',
      '{"resize":{"cols":80.5,"rows":24}}',
      '{"resize":{"cols":"80","rows":24}}',
      '{"resize":{"cols":80}}',
      '{"resize":null}',
    ])
      expect(shellMessage(text)).toBeUndefined();
  });
});
