import { getMetadataStorage, ValidationTypes, type ValidationArguments } from 'class-validator';
import { createRequire } from 'node:module';
import { type Class } from './contract.js';
import { ContainerFailed } from './container/container-failed.js';
import { ContainerReady } from './container/container-ready.js';
import { ContainerScheduled } from './container/container-scheduled.js';
import { ContainerStarted } from './container/container-started.js';
import { ContainerStarting } from './container/container-starting.js';
import { ContainerStopped } from './container/container-stopped.js';
import { MachineHeartbeat } from './machine/machine-heartbeat.js';
import { rulesVersion } from './validation-metadata-cache.js';

/**
 * A payload class's class-validator rules compiled once into a plain synchronous check of the
 * parsed JSON, for the messages every machine sends every few seconds (bench/agents: validating
 * a heartbeat through class-transformer and class-validator was 24 % of the scheduler's CPU).
 *
 * Nothing is written twice: the check is built from the decorators' own metadata and calls the
 * same constraint functions class-validator calls (`IsInt`'s, `Matches`' …) with the same
 * arguments; what it replaces is the machinery around them (instances made by class-transformer
 * before validating, a ValidationError per property, promises). It mirrors `validate(…, {
 * whitelist: true, forbidNonWhitelisted: true })` over `plainToInstance`: unknown properties,
 * conditions (IsOptional, IsNullable), `each`, nested classes through `@Type`, and an unknown
 * value where a nested class has no rules.
 *
 * It only ever says yes: a payload it does not accept goes through class-validator, which
 * refuses it with the reason it always gave (or accepts one of the oddities class-transformer
 * drops on the way, such as a `constructor` key). A class it cannot mirror exactly (async
 * rules, `validateIf`, class-transformer's `@Transform`/`@Expose`/`@Exclude`, a `@Type` that
 * converts a value, field initialisers) gets no compiled check at all.
 */
export type CompiledValidator<T> = (plain: object) => T | undefined;

/**
 * The payloads validated through their compiled check: a machine's own messages, which arrive
 * per machine every few seconds (heartbeats) or minutes (container lifecycle). Each is proven
 * to agree with class-validator in compiled-validation.spec.ts; other payloads keep the plain path.
 */
export const COMPILED_PAYLOADS: ReadonlySet<Class<object>> = new Set([
  MachineHeartbeat,
  ContainerScheduled,
  ContainerStarting,
  ContainerStarted,
  ContainerReady,
  ContainerStopped,
  ContainerFailed,
]);

/** class-transformer keeps its decorators' metadata in a module its index does not export. */
interface TransformerStorage {
  findTypeMetadata(
    target: Class<object>,
    property: string,
  ): { typeFunction?: (o?: unknown) => unknown; options?: { discriminator?: unknown } } | undefined;
  findTransformMetadatas(target: Class<object>, property: string, type: number): unknown[];
  getExposedMetadatas(target: Class<object>): unknown[];
  getExcludedMetadatas(target: Class<object>): unknown[];
}
let transformerMetadata: TransformerStorage | undefined;
/**
 * Looked up on the first compile, not at import: a bundle of code that imports the contracts but
 * never validates a machine's message (the packaged CLI, the device check) carries no
 * class-transformer to require.
 */
function transformerStorage(): TransformerStorage {
  transformerMetadata ??= (
    createRequire(import.meta.url)('class-transformer/cjs/storage.js') as { defaultMetadataStorage: TransformerStorage }
  ).defaultMetadataStorage;
  return transformerMetadata;
}

type Rule = ReturnType<ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']>[number];
type Check = (value: unknown, object: Record<string, unknown>) => boolean;

/** What class-transformer turns into something else than a copy, so a plain value is not what class-validator would see. */
const CONVERTING_TYPES = new Set<unknown>([String, Number, Boolean, Date, Buffer, Map, Set, Promise, Object, Array]);

class Uncompilable extends Error {}

interface Node {
  cls: Class<object>;
  /** Whether `plain` passes every rule of the class. */
  check(plain: Record<string, unknown>): boolean;
  /** The properties class-transformer makes instances of, and their class. */
  typed: Map<string, Node>;
}

const storage = getMetadataStorage();
let compiled = new Map<Class<object>, CompiledValidator<object> | null>();
let compiledFor = -1;

/** The compiled check of one of COMPILED_PAYLOADS (built on first use); undefined for any other class. */
export function compiledValidatorOf<T extends object>(cls: Class<T>): CompiledValidator<T> | undefined {
  if (!COMPILED_PAYLOADS.has(cls)) return undefined;
  if (compiledFor !== rulesVersion()) {
    compiled = new Map();
    compiledFor = rulesVersion();
  }
  let validator = compiled.get(cls);
  if (validator === undefined) {
    validator = compileValidator(cls) ?? null;
    compiled.set(cls, validator);
  }
  return (validator ?? undefined) as CompiledValidator<T> | undefined;
}

/** Compiles `cls` afresh (see CompiledValidator); undefined when it cannot be mirrored exactly. */
export function compileValidator<T extends object>(cls: Class<T>): CompiledValidator<T> | undefined {
  let root: Node;
  try {
    root = compileClass(cls as Class<object>, '', new Map());
  } catch (e) {
    if (e instanceof Uncompilable) return undefined;
    throw e;
  }
  return (plain) => (root.check(plain as Record<string, unknown>) ? (instanceOf(root, plain as Record<string, unknown>) as T) : undefined);
}

/** What plainToInstance makes of a payload that passed: an instance per typed object, every other value as parsed. */
function instanceOf(node: Node, plain: Record<string, unknown>): object {
  const instance = new node.cls() as Record<string, unknown>;
  for (const key of Object.keys(plain)) {
    const nested = node.typed.get(key);
    instance[key] = nested ? converted(nested, plain[key]) : plain[key];
  }
  return instance;
}

function converted(node: Node, value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => converted(node, v));
  return typeof value === 'object' && value !== null ? instanceOf(node, value as Record<string, unknown>) : value;
}

function compileClass(cls: Class<object>, schema: string, done: Map<Class<object>, Node>): Node {
  const known = done.get(cls);
  if (known) return known;
  const node: Node = { cls, check: () => false, typed: new Map() };
  done.set(cls, node);
  const rules = storage.getTargetValidationMetadatas(cls, schema, false, false, undefined);
  // No rules: class-validator's forbidUnknownValues refuses the object.
  if (!rules.length) return node;
  if (transformerStorage().getExposedMetadatas(cls).length || transformerStorage().getExcludedMetadatas(cls).length)
    throw new Uncompilable();
  if (hasInitialisers(cls)) throw new Uncompilable();
  const byProperty = storage.groupByPropertyName(rules);
  const properties = Object.keys(byProperty);
  if (properties.some((p) => p in cls.prototype)) throw new Uncompilable();
  const checks = properties.map((property) => compileProperty(cls, property, byProperty[property], node, done));
  const allowed = new Set(properties);
  node.check = (plain) => {
    // forbidNonWhitelisted. '__proto__' and 'constructor' are dropped by class-transformer; they are left to it.
    for (const key of Object.keys(plain)) if (!allowed.has(key)) return false;
    for (let i = 0; i < checks.length; i++) if (!checks[i](plain[properties[i]], plain)) return false;
    return true;
  };
  return node;
}

/** Whether a new instance already holds values (field initialisers), which plainToInstance would keep. */
function hasInitialisers(cls: Class<object>): boolean {
  try {
    return Object.keys(new cls()).length > 0;
  } catch {
    return true;
  }
}

function compileProperty(cls: Class<object>, property: string, rules: Rule[], node: Node, done: Map<Class<object>, Node>): Check {
  if (transformerStorage().findTransformMetadatas(cls, property, 0).length) throw new Uncompilable();
  const conditions: Check[] = [];
  const constraints: Check[] = [];
  const nested: Rule[] = [];
  for (const rule of rules) {
    if (rule.validateIf) throw new Uncompilable();
    switch (rule.type) {
      case ValidationTypes.CONDITIONAL_VALIDATION: {
        const condition = rule.constraints[0] as (object: object, value: unknown) => boolean;
        conditions.push((value, object) => condition(object, value));
        break;
      }
      case ValidationTypes.IS_DEFINED:
      case ValidationTypes.CUSTOM_VALIDATION:
        constraints.push(...compileConstraints(cls, rule));
        break;
      case ValidationTypes.NESTED_VALIDATION:
        nested.push(rule);
        break;
      case ValidationTypes.WHITELIST:
        break;
      default:
        throw new Uncompilable();
    }
  }
  const type = transformerStorage().findTypeMetadata(cls, property);
  let target: Node | undefined;
  if (type) {
    const made = type.typeFunction?.();
    if (type.options?.discriminator || typeof made !== 'function' || CONVERTING_TYPES.has(made) || !nested.length) throw new Uncompilable();
    const first = nested[0].target;
    target = compileClass(made as Class<object>, typeof first === 'string' ? first : first.name, done);
    node.typed.set(property, target);
  }
  // A nested value that is an object and has no @Type stays a plain Object, which has no rules.
  const nestedCheck = (value: unknown): boolean =>
    value === undefined ||
    (Array.isArray(value)
      ? value.every(nestedCheck)
      : typeof value === 'object' && value !== null && !!target?.check(value as Record<string, unknown>));
  return (value, object) => {
    for (const condition of conditions) if (!condition(value, object)) return true;
    for (const constraint of constraints) if (!constraint(value, object)) return false;
    return !nested.length || nestedCheck(value);
  };
}

/** The rule's constraint functions, called as class-validator calls them (with `each`, on every element, the arguments naming the whole array). */
function compileConstraints(cls: Class<object>, rule: Rule): Check[] {
  return storage.getTargetValidatorConstraints(rule.constraintCls).map((constraint) => {
    if (constraint.async) throw new Uncompilable();
    const passes = (checked: unknown, value: unknown, object: object) => {
      const args: ValidationArguments = { targetName: cls.name, property: rule.propertyName, object, value, constraints: rule.constraints };
      const valid: unknown = constraint.instance.validate(checked, args);
      // A promise is an async rule after all: left to class-validator.
      return !!valid && !(valid instanceof Promise);
    };
    return rule.each
      ? (value, object) => (Array.isArray(value) ? value.every((v) => passes(v, value, object)) : passes(value, value, object))
      : (value, object) => passes(value, value, object);
  });
}
