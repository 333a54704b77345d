// class-transformer's @Type reads design:type metadata, so every payload module needs the Reflect polyfill loaded first.
import 'reflect-metadata';

/**
 * A contract ties one NATS subject to the class that validates its payload. Subjects are
 * written with the root token `tern`; the messaging library swaps it for the configured
 * namespace (NATS_NAMESPACE) on the wire. A `*` token stands for a value filled in at
 * send time (a machine id, a deployment id); `subjectFor` fills them.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a constructor of any parameters: `never[]` would refuse class-transformer's ClassConstructor
export type Class<T> = new (...args: any[]) => T;

/** event: a fact, fanned out; command: an order one party must act on; request: a question with a reply. */
export type ContractKind = 'event' | 'command' | 'request';

export interface Contract<T extends object = object, R extends object = object> {
  readonly subject: string;
  readonly kind: ContractKind;
  readonly payload: Class<T>;
  /** The reply's payload class, for request contracts. */
  readonly reply?: Class<R>;
  /** JetStream stream that stores the subject; absent for core NATS (request/reply, ephemeral). */
  readonly stream?: StreamName;
  /**
   * Set on facts a machine publishes (and on facts about one machine that only it may hear): the
   * payload field naming the machine, whose id is also the subject's third token (`tern.container.<machine id>.started.v1`), so NATS permissions
   * can let a machine publish only its own facts. Publishing fills that token from the field;
   * consumers drop a message whose two ids differ (see `machineIdMismatch`).
   */
  readonly machineIdField?: string;
  readonly description: string;
}

export const SUBJECT_ROOT = 'tern';

/** Streams, named without the namespace (the messaging library prefixes `<namespace>_`). */
export type StreamName = 'EVENTS' | 'COMMANDS' | 'TASKS' | 'HEARTBEATS';

/** Index of the token that holds the publishing machine's id in a subject of a contract with `machineIdField`. */
const MACHINE_TOKEN = 2;

const registry = new Map<string, Contract>();
/**
 * The patterns' tokens, split once and grouped by their number, in the order of definition:
 * findContract runs for every message a consumer takes (a heartbeat's subject is never a
 * pattern), and splitting every contract's subject each time was most of its cost.
 */
const patternsByLength = new Map<number, { contract: Contract; tokens: string[] }[]>();

export function defineContract<T extends object, R extends object = object>(c: Contract<T, R>): Contract<T, R> {
  if (!c.subject.startsWith(`${SUBJECT_ROOT}.`)) throw new Error(`subject ${c.subject} must start with ${SUBJECT_ROOT}.`);
  if (!/\.v\d+$/.test(c.subject)) throw new Error(`subject ${c.subject} must end with a version token such as .v1`);
  if (registry.has(c.subject)) throw new Error(`subject ${c.subject} is defined twice`);
  if (c.machineIdField && c.subject.split('.')[MACHINE_TOKEN] !== '*')
    throw new Error(`subject ${c.subject} names the publishing machine, so its third token must be *`);
  registry.set(c.subject, c as Contract);
  const tokens = c.subject.split('.');
  const sameLength = patternsByLength.get(tokens.length) ?? [];
  if (!patternsByLength.has(tokens.length)) patternsByLength.set(tokens.length, sameLength);
  sameLength.push({ contract: c as Contract, tokens });
  return c;
}

export function allContracts(): Contract[] {
  return [...registry.values()];
}

/** The contract whose subject pattern (with `*` tokens) matches a concrete subject or equals a pattern. */
export function findContract(subject: string): Contract | undefined {
  const exact = registry.get(subject);
  if (exact) return exact;
  const tokens = subject.split('.');
  for (const { contract, tokens: pattern } of patternsByLength.get(tokens.length) ?? [])
    if (pattern.every((p, i) => p === '*' || p === tokens[i])) return contract;
  return undefined;
}

/** Fills the `*` tokens of a contract's subject, in order. Tokens must be non-empty and free of `.`, `*`, `>` and spaces. */
export function subjectFor(contract: Contract, ...values: string[]): string {
  return fillTokens(contract, values);
}

/**
 * A subscription filter for a contract: its `*` tokens filled where a value is given and left
 * `*` where it is undefined (e.g. one deployment's log lines from every machine and container).
 */
export function subjectFilter(contract: Contract, ...values: (string | undefined)[]): string {
  return fillTokens(contract, values);
}

function fillTokens(contract: Contract, values: readonly (string | undefined)[]): string {
  const parts = contract.subject.split('.');
  const wild = parts.filter((p) => p === '*').length;
  if (wild !== values.length) throw new Error(`${contract.subject} needs ${wild} value(s), got ${values.length}`);
  let i = 0;
  return parts
    .map((p) => {
      if (p !== '*') return p;
      const v = values[i++];
      if (v === undefined) return '*';
      if (!/^[A-Za-z0-9_-]+$/.test(v)) throw new Error(`invalid subject token ${JSON.stringify(v)} for ${contract.subject}`);
      return v;
    })
    .join('.');
}

/**
 * The subject's tokens for publishing a payload: all of them when given; a contract with
 * `machineIdField` given one fewer takes the machine id, its first token, from the payload.
 */
export function subjectTokensOf(contract: Contract, payload: object, tokens: readonly string[] = []): string[] {
  const wild = contract.subject.split('.').filter((p) => p === '*').length;
  if (!contract.machineIdField || tokens.length === wild) return [...tokens];
  const machineId = (payload as Record<string, unknown>)[contract.machineIdField];
  if (typeof machineId !== 'string')
    throw new Error(`${contract.subject}: the payload has no ${contract.machineIdField} to name its subject`);
  return [machineId, ...tokens];
}

/**
 * Why a message of a machine's fact cannot be believed: its payload names another machine than
 * its subject (the machine NATS let publish it). Undefined when they agree or the contract names no machine.
 */
export function machineIdMismatch(contract: Contract, subject: string, payload: object): string | undefined {
  if (!contract.machineIdField) return undefined;
  const fromSubject = subject.split('.')[MACHINE_TOKEN];
  const fromPayload = (payload as Record<string, unknown>)[contract.machineIdField];
  if (fromSubject === fromPayload) return undefined;
  return `${contract.machineIdField} ${JSON.stringify(fromPayload)} differs from the machine ${JSON.stringify(fromSubject)} of its subject ${subject}`;
}
