import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { VARIABLES, type VariableSpec } from '../libs/config/src/variables.js';
import { CONFIG_KEYS } from '../apps/agent/src/settings/config-file.js';
import { ENV_KEYS } from '../apps/agent/src/settings/agent-settings.js';

/**
 * docs/configuration.md's tables are rendered from the one list of variables (libs/config) and the
 * agent's config.yaml keys, so a variable added, renamed or given a new default changes the page
 * or fails here. UPDATE_DOCS=1 rewrites the generated part; the prose around it is the page's own.
 */
const ROOT = join(import.meta.dirname, '..');
const DOC = join(ROOT, 'docs', 'configuration.md');
const BEGIN =
  '<!-- generated: UPDATE_DOCS=1 node --experimental-vm-modules node_modules/jest/bin/jest.js scripts/configuration-doc.spec.ts -->';
const END = '<!-- end of generated -->';

const cell = (text: string) => text.replace(/\|/g, '\\|');
const code = (text: string) => `\`${text}\``;

function defaultOf(v: VariableSpec): string {
  if (v.serviceDefaults) {
    return Object.entries(v.serviceDefaults)
      .map(([service, value]) => `${service} ${code(value)}`)
      .join(', ');
  }
  return v.default === undefined ? '—' : code(v.default);
}

const agentOnly = (v: VariableSpec) => v.services !== 'all' && v.services.length === 1 && v.services[0] === 'agent';

function servicesTable(): string[] {
  const rows = (VARIABLES as readonly VariableSpec[])
    .filter((v) => !agentOnly(v))
    .map((v) => {
      const services = v.services === 'all' ? 'all' : v.services.join(', ');
      return `| ${code(v.name)} | ${cell(defaultOf(v))} | ${services} | ${cell(v.description)} |`;
    });
  return ['| variable | default | read by | meaning |', '| --- | --- | --- | --- |', ...rows];
}

function agentTable(): string[] {
  const keyOf = new Map<string, string>(Object.entries(ENV_KEYS));
  const specOf = new Map((VARIABLES as readonly VariableSpec[]).filter(agentOnly).map((v) => [v.name, v]));
  const names = [...new Set([...keyOf.keys(), ...specOf.keys()])];
  const rows = names.map((name) => {
    const key = keyOf.get(name) as keyof typeof CONFIG_KEYS | undefined;
    const spec = specOf.get(name);
    const meaning = spec?.description ?? CONFIG_KEYS[key!].description;
    return `| ${code(name)} | ${key ? code(key) : '—'} | ${spec ? cell(defaultOf(spec)) : '—'} | ${cell(meaning)} |`;
  });
  return ['| variable | config.yaml | default | meaning |', '| --- | --- | --- | --- |', ...rows];
}

export function renderGenerated(): string {
  return [
    BEGIN,
    '',
    '### Services',
    '',
    ...servicesTable(),
    '',
    '### Agent',
    '',
    "Each may also be a key of `config.yaml` in the agent's state directory (`tern-agent init`, `tern-agent config set`); the variable wins.",
    '',
    ...agentTable(),
    '',
    END,
  ].join('\n');
}

function generatedPart(doc: string): string {
  const from = doc.indexOf(BEGIN);
  const to = doc.indexOf(END);
  if (from < 0 || to < from) throw new Error(`docs/configuration.md lacks the generated block (${BEGIN} … ${END})`);
  return doc.slice(from, to + END.length);
}

/** The TERN_* variables scripts/*.mjs read (npm run up, down, test), less the one up sets for its own child. */
function scriptVariables(): string[] {
  const dirs = [join(ROOT, 'scripts'), join(ROOT, 'scripts', 'lib')];
  const found = new Set<string>();
  for (const dir of dirs) {
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.mjs'))) {
      for (const m of readFileSync(join(dir, file), 'utf8').matchAll(/env(?:\.|\[['"])(TERN_[A-Z0-9_]+)/g)) found.add(m[1]!);
    }
  }
  found.delete('TERN_UP_DETACHED');
  return [...found].sort();
}

describe('docs/configuration.md', () => {
  it('holds the tables rendered from libs/config/src/variables.ts and the agent config keys', () => {
    const doc = readFileSync(DOC, 'utf8');
    const rendered = renderGenerated();
    if (process.env.UPDATE_DOCS === '1') {
      writeFileSync(DOC, doc.replace(generatedPart(doc), rendered));
      return;
    }
    expect(generatedPart(doc)).toBe(rendered);
  });

  it('names every variable once, the agent config keys included', () => {
    const rendered = renderGenerated();
    const names = [...rendered.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
    const expected = new Set([...VARIABLES.map((v) => v.name), ...Object.keys(ENV_KEYS)]);
    expect(names.sort()).toEqual([...expected].sort());
  });

  it("names every TERN_* variable that npm run up, down and test read (scripts/README.md's Environment)", () => {
    const env = /## Environment\n([\s\S]*?)(\n## |$)/.exec(readFileSync(join(ROOT, 'scripts', 'README.md'), 'utf8'))?.[1] ?? '';
    expect(scriptVariables().filter((name) => !env.includes(name))).toEqual([]);
  });
});
