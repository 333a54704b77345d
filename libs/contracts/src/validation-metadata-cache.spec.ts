import { IsInt, IsString, validate } from 'class-validator';
import './validation-metadata-cache.js';

class Base {
  @IsString()
  name!: unknown;
}

class Derived extends Base {
  @IsInt()
  count!: unknown;
}

const failures = async (value: object) =>
  (await validate(value, { whitelist: true, forbidNonWhitelisted: true })).map((e) => Object.keys(e.constraints ?? {}).join()).sort();

describe('the kept rule lookup', () => {
  it('runs the same rules on every validation, inherited ones included', async () => {
    for (let i = 0; i < 2; i++) {
      expect(await failures(Object.assign(new Derived(), { name: 1, count: 'x' }))).toEqual(['isInt', 'isString']);
      expect(await failures(Object.assign(new Derived(), { name: 'a', count: 1, extra: 1 }))).toEqual(['whitelistValidation']);
      expect(await failures(Object.assign(new Base(), { name: 'a', count: 1 }))).toEqual(['whitelistValidation']);
    }
  });

  it('drops what it kept when a rule is added', async () => {
    class Late {
      @IsString()
      name!: unknown;
      size!: unknown;
    }
    expect(await failures(Object.assign(new Late(), { name: 'a' }))).toEqual([]);
    IsInt()(Late.prototype, 'size');
    expect(await failures(Object.assign(new Late(), { name: 'a', size: 'big' }))).toEqual(['isInt']);
  });
});
