import { Matches, type MetadataStorage, ValidateBy, ValidationTypes, buildMessage, getMetadataStorage } from 'class-validator';
import { isIPv4 } from 'node:net';
import { fromPublic } from '@nats-io/nkeys';

/**
 * Decorators shared by the payload classes. Each registers ordinary class-validator metadata
 * under its own name, so validation runs it and `renderNatsDoc` can describe it.
 */

/** Ids that travel as subject tokens (machine, deployment, container, task, workspace): the same rule `subjectFor` enforces. */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export function IsId(): PropertyDecorator {
  return Matches(ID_PATTERN, { message: '$property must be 1-64 letters, digits, - or _' });
}

export const IS_NULLABLE = 'isNullable';

/**
 * The property must be present and may be `null`; the other validators run on any other
 * value. (IsOptional would also let the property be missing, which hides a sender's bug.)
 */
export function IsNullable(): PropertyDecorator {
  return (target, propertyKey) => {
    const propertyName = String(propertyKey);
    const metadata: Parameters<MetadataStorage['addValidationMetadata']>[0] = {
      type: ValidationTypes.CONDITIONAL_VALIDATION,
      name: IS_NULLABLE,
      target: target.constructor,
      propertyName,
      constraintCls: Object,
      constraints: [(object: Record<string, unknown>) => object[propertyName] !== null],
      message: '',
      groups: [],
      each: false,
      validationTypeOptions: undefined,
    };
    getMetadataStorage().addValidationMetadata(metadata);
  };
}

export const IS_RECORD_OF_STRINGS = 'isRecordOfStrings';
export const IS_RECORD_OF_NUMBERS = 'isRecordOfNumbers';

/** A plain JSON object whose values are all strings (env) or all finite numbers (score components). */
export function IsRecordOf(valueType: 'string' | 'number'): PropertyDecorator {
  return ValidateBy({
    name: valueType === 'string' ? IS_RECORD_OF_STRINGS : IS_RECORD_OF_NUMBERS,
    validator: {
      validate: (value: unknown) =>
        typeof value === 'object' &&
        value !== null &&
        !Array.isArray(value) &&
        Object.values(value).every((v) => (valueType === 'string' ? typeof v === 'string' : Number.isFinite(v))),
      defaultMessage: buildMessage((each) => `${each}$property must be an object whose values are all ${valueType}s`),
    },
  });
}

export const IS_IPV4_CIDR = 'isIpv4Cidr';

/** Why `value` is not an IPv4 network (`a.b.c.d/n`, or a bare address for /32) with no host bits set; undefined when it is. */
export function ipv4CidrProblem(value: unknown): string | undefined {
  const [ip, prefix, extra] = typeof value === 'string' ? value.split('/') : [];
  if (extra !== undefined || !isIPv4(ip ?? '') || (prefix !== undefined && !/^(\d|[12]\d|3[0-2])$/.test(prefix)))
    return `${JSON.stringify(value)} is not an IPv4 address or CIDR such as 203.0.113.0/24`;
  const bits = Number(prefix ?? 32);
  const address = ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
  const host = address % 2 ** (32 - bits);
  if (host === 0) return undefined;
  const dotted = [24, 16, 8, 0].map((shift) => Math.floor((address - host) / 2 ** shift) % 256).join('.');
  return `${JSON.stringify(value)} has host bits set: the network is ${dotted}/${bits}`;
}

/** Each element an IPv4 CIDR (see ipv4CidrProblem). */
export function IsIpv4Cidr(): PropertyDecorator {
  return ValidateBy(
    {
      name: IS_IPV4_CIDR,
      validator: {
        validate: (value: unknown) => ipv4CidrProblem(value) === undefined,
        defaultMessage: (args) => {
          const values: unknown[] = Array.isArray(args?.value) ? (args.value as unknown[]) : [args?.value];
          const problem = values.map(ipv4CidrProblem).find((p) => p !== undefined);
          return `$property must hold IPv4 CIDRs such as 203.0.113.0/24${problem ? `: ${problem}` : ''}`;
        },
      },
    },
    { each: true },
  );
}

export const IS_USER_PUBLIC_KEY = 'isUserPublicKey';

/**
 * Why `value` is not an nkey user public key (`U` and 55 base32 characters whose last two bytes
 * are a CRC-16 of the rest); undefined when it is. The checksum is checked here, where the
 * request is refused with a 400, not where a JWT is signed for the key after rows were written.
 */
export function userPublicKeyProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' || !/^U[A-Z2-7]{55}$/.test(value))
    return 'must be an nkey user public key (U followed by 55 base32 characters)';
  try {
    fromPublic(value);
    return undefined;
  } catch {
    return 'is not an nkey user public key: its checksum does not match (a character was changed or lost); send the public key of the pair exactly as nkeys printed it';
  }
}

/** An nkey user public key, checksum included (see userPublicKeyProblem). */
export function IsUserPublicKey(): PropertyDecorator {
  return ValidateBy({
    name: IS_USER_PUBLIC_KEY,
    validator: {
      validate: (value: unknown) => userPublicKeyProblem(value) === undefined,
      defaultMessage: (args) => `$property ${userPublicKeyProblem(args?.value)}`,
    },
  });
}

/** Several property rules as one, for a field whose rules two specs share. */
export function allOf(...rules: PropertyDecorator[]): PropertyDecorator {
  return (target, key) => {
    for (const rule of rules) rule(target, key);
  };
}
