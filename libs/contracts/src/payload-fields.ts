import { plainToInstance } from 'class-transformer';
import { type MetadataStorage, ValidationTypes, getMetadataStorage } from 'class-validator';
import type { Class } from './contract.js';
import { ID_PATTERN, IS_IPV4_CIDR, IS_NULLABLE, IS_RECORD_OF_NUMBERS, IS_RECORD_OF_STRINGS, IS_USER_PUBLIC_KEY } from './validation.js';

/**
 * Reads a payload class's fields back out of its class-validator metadata, so the docs
 * describe exactly what validation enforces.
 */
export interface FieldDoc {
  readonly name: string;
  /** e.g. "string", "integer[]", "GpuUsage[]", "integer | null". */
  readonly type: string;
  readonly required: boolean;
  /** Human-readable constraints beyond the type, in source order. */
  readonly rules: readonly string[];
  /** The class of a nested object (or of each item of a nested array). */
  readonly nested?: Class<object>;
}

type Metadata = ReturnType<MetadataStorage['getTargetValidationMetadatas']>[number];

/** Validators that only say what the type is; the type column shows them. */
const TYPE_ONLY = new Set([
  'isString',
  'isInt',
  'isNumber',
  'isBoolean',
  'isObject',
  'isArray',
  'isOptional',
  IS_NULLABLE,
  IS_RECORD_OF_STRINGS,
  IS_RECORD_OF_NUMBERS,
]);

const STRING_FORMATS = new Set([
  'isString',
  'matches',
  'isIso8601',
  'isUrl',
  'isBase64',
  'isIp',
  'isNotEmpty',
  'maxLength',
  'minLength',
  IS_IPV4_CIDR,
  IS_USER_PUBLIC_KEY,
]);

export function describeFields(payload: Class<object>): FieldDoc[] {
  return [...groupedMetadata(payload)].map(([name, metadata]) => describeField(payload, name, metadata));
}

/**
 * Metadata per property, base-class properties first, each property's validators in source
 * order (TypeScript applies a property's decorators last to first, so each list is reversed).
 */
function groupedMetadata(payload: Class<object>): Map<string, Metadata[]> {
  const all = getMetadataStorage().getTargetValidationMetadatas(payload, '', false, false);
  const byProperty = new Map<string, Metadata[]>();
  for (const target of classChain(payload)) {
    for (const m of all.filter((x) => x.target === target)) {
      byProperty.set(m.propertyName, [...(byProperty.get(m.propertyName) ?? []), m]);
    }
  }
  for (const [name, list] of byProperty) byProperty.set(name, list.reverse());
  return byProperty;
}

/** A class and the classes it extends, the base first. */
function classChain(cls: object): object[] {
  const chain: object[] = [];
  for (let c: object | null = cls; c && c !== Function.prototype; c = Object.getPrototypeOf(c) as object | null) chain.unshift(c);
  return chain;
}

function describeField(payload: Class<object>, name: string, metadata: Metadata[]): FieldDoc {
  const names = new Set(metadata.map(ruleName));
  const nested = names.has(ValidationTypes.NESTED_VALIDATION) ? nestedClass(payload, name) : undefined;
  const isList = names.has('isArray') || metadata.some((m) => m.each);
  let type = baseType(names, metadata, nested);
  if (isList) type += '[]';
  if (names.has(IS_NULLABLE)) type += ' | null';
  const rules = metadata
    .filter((m) => !TYPE_ONLY.has(ruleName(m)) && ruleName(m) !== ValidationTypes.NESTED_VALIDATION)
    .map((m) => (m.each ? `each ${describeRule(m)}` : describeRule(m)))
    .filter((r) => r.length > 0);
  return { name, type, required: !names.has('isOptional'), rules, ...(nested ? { nested } : {}) };
}

function ruleName(m: Metadata): string {
  return m.name ?? m.type;
}

function baseType(names: Set<string>, metadata: Metadata[], nested: Class<object> | undefined): string {
  if (names.has(ValidationTypes.NESTED_VALIDATION)) return nested?.name ?? 'object';
  if (names.has(IS_RECORD_OF_STRINGS)) return 'Record<string, string>';
  if (names.has(IS_RECORD_OF_NUMBERS)) return 'Record<string, number>';
  if (names.has('isInt')) return 'integer';
  if (names.has('isNumber')) return 'number';
  if (names.has('isBoolean')) return 'boolean';
  if (names.has('isObject')) return 'object';
  if ([...names].some((n) => STRING_FORMATS.has(n))) return 'string';
  const isIn = metadata.find((m) => ruleName(m) === 'isIn');
  if (isIn) return [...new Set((isIn.constraints[0] as unknown[]).map((v) => typeof v))].join(' | ');
  if (names.has(ValidationTypes.WHITELIST) || names.has('isDefined')) return 'any JSON';
  return 'unknown';
}

function describeRule(m: Metadata): string {
  const [first] = m.constraints ?? [];
  switch (ruleName(m)) {
    case 'min':
      return `≥ ${first}`;
    case 'max':
      return `≤ ${first}`;
    case 'isIn':
      return `one of ${(first as unknown[]).map((v) => `\`${String(v)}\``).join(', ')}`;
    case 'matches':
      return String(first) === String(ID_PATTERN) ? 'id: 1-64 letters, digits, `-` or `_`' : `matches \`${String(first)}\``;
    case 'isIso8601':
      return 'ISO-8601 date-time';
    case 'isUrl':
      return 'URL';
    case 'isBase64':
      return 'base64';
    case 'isIp':
      return first ? `IPv${first} address` : 'IP address';
    case 'isNotEmpty':
      return 'not empty';
    case IS_IPV4_CIDR:
      return 'IPv4 CIDR, no host bits set';
    case IS_USER_PUBLIC_KEY:
      return 'nkey user public key (U…), checksum checked';
    case 'arrayMaxSize':
      return `at most ${first} items`;
    case 'maxLength':
      return `at most ${first} characters`;
    case 'minLength':
      return `at least ${first} characters`;
    case ValidationTypes.WHITELIST:
      return '';
    case 'isDefined':
      return 'not null';
    default:
      return ruleName(m);
  }
}

/**
 * The class class-transformer builds for a nested property, found by transforming a probe
 * (an object, then a one-item array) through the payload class: this reads the @Type
 * metadata through the public API instead of class-transformer's internal storage.
 */
function nestedClass(payload: Class<object>, property: string): Class<object> | undefined {
  for (const probe of [{}, [{}]]) {
    const value = (plainToInstance(payload, { [property]: probe }) as Record<string, unknown>)[property];
    const item = Array.isArray(value) ? value[0] : value;
    if (typeof item === 'object' && item !== null && item.constructor !== Object) return item.constructor as Class<object>;
  }
  return undefined;
}
