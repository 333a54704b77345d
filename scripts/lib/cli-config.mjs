import { cliConfigPath } from './paths.mjs';
import { readJson, writeJson } from './state.mjs';

/**
 * Merges a context into the CLI config (~/.tern/config.json) and makes it current.
 * Other contexts and unknown keys are kept; the file is written with mode 600 (it holds tokens).
 */
export function mergeContext(existing, name, context) {
  const base = existing && typeof existing === 'object' && !Array.isArray(existing) ? existing : {};
  const contexts = base.contexts && typeof base.contexts === 'object' ? base.contexts : {};
  return { ...base, current: name, contexts: { ...contexts, [name]: { ...(contexts[name] ?? {}), ...context } } };
}

export function writeCliContext(name, context, path = cliConfigPath()) {
  let existing;
  try {
    existing = readJson(path, {});
  } catch {
    existing = {}; // unreadable config: replaced rather than failing `up`
  }
  writeJson(path, mergeContext(existing, name, context), 0o600);
  return path;
}
