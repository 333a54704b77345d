import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  AGENT_CONTAINER_START,
  CONTAINER_STOPPED,
  MACHINE_HEARTBEAT,
  NATS_DOC_REGENERATE,
  allContracts,
  describeFields,
  renderNatsDoc,
} from './index.js';

const docPath = fileURLToPath(new URL('../../../docs/nats.md', import.meta.url));

describe('docs/nats.md', () => {
  const rendered = renderNatsDoc();

  it('matches renderNatsDoc()', () => {
    if (process.env.UPDATE_DOCS === '1') {
      writeFileSync(docPath, rendered);
      return;
    }
    const current = existsSync(docPath) ? readFileSync(docPath, 'utf8') : '';
    if (current !== rendered) {
      throw new Error(`docs/nats.md is out of date with libs/contracts. Regenerate it with: ${NATS_DOC_REGENERATE}`);
    }
  });

  it('has a section for every subject and every stream', () => {
    for (const c of allContracts()) expect(rendered).toContain(`### \`${c.subject}\``);
    for (const s of ['EVENTS', 'COMMANDS', 'TASKS', 'HEARTBEATS']) expect(rendered).toContain(`| \`${s}\` |`);
  });

  it('explains namespaces, dedupe and service discovery', () => {
    expect(rendered).toContain('NATS_NAMESPACE');
    expect(rendered).toContain('Nats-Msg-Id');
    expect(rendered).toContain('$SRV.PING');
    expect(rendered).toContain('<namespace>-<service>');
  });
});

describe('describeFields', () => {
  it('reads types, optionality and rules from the validators, in source order', () => {
    const fields = describeFields(MACHINE_HEARTBEAT.payload);
    expect(fields.map((f) => f.name)).toEqual([
      'machineId',
      'pool',
      'sentAt',
      'sequence',
      'cpuPercent',
      'memoryPercent',
      'gpus',
      'runningContainers',
      'agentVersion',
      'isolation',
      'builder',
      'siteCache',
    ]);
    const byName = Object.fromEntries(fields.map((f) => [f.name, f]));
    expect(byName.sequence).toMatchObject({ type: 'integer', required: true, rules: ['≥ 0'] });
    expect(byName.cpuPercent).toMatchObject({ type: 'number', rules: ['≥ 0', '≤ 100'] });
    expect(byName.gpus).toMatchObject({ type: 'GpuUsage[]', nested: expect.any(Function) });
    expect(byName.runningContainers.type).toBe('string[]');
    expect(byName.agentVersion.required).toBe(false);
    expect(byName.sentAt.rules).toEqual(['ISO-8601 date-time']);
  });

  it('lists inherited fields first and shows nullable and record types', () => {
    const fields = describeFields(CONTAINER_STOPPED.payload);
    expect(fields.slice(0, 2).map((f) => f.name)).toEqual(['containerId', 'deploymentId']);
    expect(fields.find((f) => f.name === 'exitCode')).toMatchObject({ type: 'integer | null', required: true });
    const start = describeFields(AGENT_CONTAINER_START.payload);
    expect(start.find((f) => f.name === 'env')?.type).toBe('Record<string, string>');
    expect(start.find((f) => f.name === 'ports')?.rules).toEqual(['each ≥ 1', 'each ≤ 65535']);
  });

  it('resolves every nested field of every payload and reply to a class, and knows every field type', () => {
    const unresolved: string[] = [];
    const queue = allContracts().flatMap((c) => [c.payload, ...(c.reply ? [c.reply] : [])]);
    for (const cls of queue) {
      const fields = describeFields(cls);
      if (fields.length === 0) unresolved.push(`${cls.name} has no validated fields`);
      for (const f of fields) {
        if (f.nested) queue.push(f.nested);
        const looksNested = /^[A-Z]/.test(f.type) && !f.type.startsWith('Record<');
        if (/unknown|object\[\]/.test(f.type) || (looksNested && !f.nested)) unresolved.push(`${cls.name}.${f.name}: ${f.type}`);
      }
    }
    expect(unresolved).toEqual([]);
  });
});
