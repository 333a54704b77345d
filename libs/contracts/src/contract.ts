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
  readonly description: string;
}

export const SUBJECT_ROOT = 'tern';

/** Streams, named without the namespace (the messaging library prefixes `<namespace>_`). */
export type StreamName = 'EVENTS' | 'COMMANDS' | 'TASKS' | 'HEARTBEATS';

const registry = new Map<string, Contract>();

export function defineContract<T extends object, R extends object = object>(c: Contract<T, R>): Contract<T, R> {
  if (!c.subject.startsWith(`${SUBJECT_ROOT}.`)) throw new Error(`subject ${c.subject} must start with ${SUBJECT_ROOT}.`);
  if (!/\.v\d+$/.test(c.subject)) throw new Error(`subject ${c.subject} must end with a version token such as .v1`);
  if (registry.has(c.subject)) throw new Error(`subject ${c.subject} is defined twice`);
  registry.set(c.subject, c as Contract);
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
  for (const c of registry.values()) {
    const pattern = c.subject.split('.');
    if (pattern.length === tokens.length && pattern.every((p, i) => p === '*' || p === tokens[i])) return c;
  }
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
