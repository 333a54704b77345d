import { plainToInstance } from 'class-transformer';
import { type ValidationError, validate } from 'class-validator';
import { type Class, compiledValidatorOf } from '#tern/contracts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: string };

export function encode(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

/** Flattens nested class-validator errors into "field.sub: rule" lines. */
export function describeValidationErrors(errors: ValidationError[], parent = ''): string[] {
  return errors.flatMap((e) => {
    const path = parent ? `${parent}.${e.property}` : e.property;
    const own = Object.values(e.constraints ?? {}).map((m) => `${path}: ${m}`);
    return [...own, ...describeValidationErrors(e.children ?? [], path)];
  });
}

/**
 * Validates a plain object against a payload class: unknown fields and type errors are both
 * rejected. The class's compiled check (compiled-validation.ts) answers for a payload it
 * accepts; any other goes through class-validator, which gives the reason.
 */
export async function validatePayload<T extends object>(cls: Class<T>, plain: unknown): Promise<Decoded<T>> {
  if (plain === null || typeof plain !== 'object' || Array.isArray(plain)) {
    return { ok: false, reason: 'payload must be a JSON object' };
  }
  const accepted = compiledValidatorOf(cls)?.(plain);
  if (accepted) return { ok: true, value: accepted };
  const value = plainToInstance(cls, plain);
  const errors = await validate(value, { whitelist: true, forbidNonWhitelisted: true });
  if (errors.length) return { ok: false, reason: describeValidationErrors(errors).join('; ') };
  return { ok: true, value };
}

/** Parses and validates a message body. Never throws: a bad message gets a reason, not an exception. */
export async function decode<T extends object>(cls: Class<T>, data: Uint8Array): Promise<Decoded<T>> {
  let plain: unknown;
  try {
    plain = JSON.parse(decoder.decode(data));
  } catch (e) {
    return { ok: false, reason: `body is not JSON (${(e as Error).message})` };
  }
  return validatePayload(cls, plain);
}
