import { getMetadataStorage } from 'class-validator';

/**
 * class-validator looks up a class's rules on every validate(): it walks every registered class
 * to find the ones the target inherits from, then groups the rules by property (3–6 % of every
 * service's CPU under task load, bench/tasks). The rules are fixed once the classes are defined,
 * so the lookup is kept per class and options, and dropped whenever a rule is added. The
 * validation itself is class-validator's own: every rule still runs on every message.
 */
type Storage = ReturnType<typeof getMetadataStorage>;
type Lookup = Storage['getTargetValidationMetadatas'];
type Rules = ReturnType<Lookup>;

const storage = getMetadataStorage();
const lookUp: Lookup = storage.getTargetValidationMetadatas.bind(storage);
const group = storage.groupByPropertyName.bind(storage);
const addRule = storage.addValidationMetadata.bind(storage);

let rulesOf = new WeakMap<object, Map<string, Rules>>();
let groupedOf = new WeakMap<Rules, ReturnType<Storage['groupByPropertyName']>>();
let version = 0;

/** Counts the rules added so far: what was built from the rules (compiled-validation.ts) is stale once it moves. */
export function rulesVersion(): number {
  return version;
}

storage.getTargetValidationMetadatas = (target, schema, always, strictGroups, groups) => {
  const key = JSON.stringify([schema, always, strictGroups, groups ?? null]);
  let byOptions = rulesOf.get(target);
  if (!byOptions) rulesOf.set(target, (byOptions = new Map()));
  let rules = byOptions.get(key);
  if (!rules) byOptions.set(key, (rules = lookUp(target, schema, always, strictGroups, groups)));
  return rules;
};

storage.groupByPropertyName = (rules) => {
  let grouped = groupedOf.get(rules);
  if (!grouped) groupedOf.set(rules, (grouped = group(rules)));
  return grouped;
};

storage.addValidationMetadata = (rule) => {
  rulesOf = new WeakMap();
  groupedOf = new WeakMap();
  version++;
  addRule(rule);
};
