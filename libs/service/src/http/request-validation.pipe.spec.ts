import 'reflect-metadata';
import { BadRequestException } from '@nestjs/common';
import { IsInt, IsString } from 'class-validator';
import { RequestValidationPipe } from './request-validation.pipe.js';

class Beat {
  @IsString()
  machineId!: string;

  @IsInt()
  sequence!: number;
}

// What Nest gives a pipe for a message handler's @Payload(): the same param type as an HTTP body.
const payload = { type: 'body' as const, metatype: Beat };

describe('RequestValidationPipe', () => {
  const pipe = new RequestValidationPipe();

  it('validates an HTTP body, refusing unknown fields and wrong types', async () => {
    await expect(pipe.transform({ machineId: 'm1', sequence: 'x' }, { type: 'body', metatype: Beat })).rejects.toBeInstanceOf(
      BadRequestException,
    );
    await expect(pipe.transform({ machineId: 'm1', sequence: 1, extra: 1 }, { type: 'body', metatype: Beat })).rejects.toBeInstanceOf(
      BadRequestException,
    );
    expect(await pipe.transform({ machineId: 'm1', sequence: 1 }, { type: 'body', metatype: Beat })).toBeInstanceOf(Beat);
  });

  it('passes through, as it is, a message payload the transport already made an instance of its class', async () => {
    const decoded = Object.assign(new Beat(), { machineId: 'm1', sequence: 1 });
    // Not a copy: class-transformer and class-validator did not run on it again.
    expect(await pipe.transform(decoded, payload)).toBe(decoded);
  });

  it('still validates a message payload that is not an instance of its class', async () => {
    await expect(pipe.transform({ machineId: 'm1', sequence: 'x' }, payload)).rejects.toBeInstanceOf(BadRequestException);
  });
});
