import { allContracts } from './contract.js';
import * as buckets from './buckets.js';
import { type BucketSpec } from './buckets.js';
import { AGENT_UNSCOPED, BUCKET_ACCESS, CONTRACT_ACCESS, INTEGRATOR_DIRECTION } from './permissions.js';
import './index.js';

const bucketSpecs = Object.values(buckets).filter(
  (v): v is BucketSpec => typeof v === 'object' && v !== null && 'name' in v && 'owner' in v && 'description' in v,
);

describe('the NATS permissions table', () => {
  it('names every contract exactly once', () => {
    const listed = CONTRACT_ACCESS.map((a) => a.contract.subject);
    expect(new Set(listed).size).toBe(listed.length);
    expect(
      allContracts()
        .map((c) => c.subject)
        .sort(),
    ).toEqual([...listed].sort());
  });

  it('gives every contract a publisher', () => {
    const silent = CONTRACT_ACCESS.filter(
      (a) => a.publish.length === 0 && (!a.integrator || INTEGRATOR_DIRECTION[a.integrator] !== 'publish'),
    );
    expect(silent.map((a) => a.contract.subject)).toEqual([]);
  });

  it("opens to integrators only subjects whose one token is the workspace id, never a machine's", () => {
    const open = CONTRACT_ACCESS.filter((a) => a.integrator);
    expect(open.map((a) => a.contract.subject).sort()).toEqual([
      'tern.notify.task-ended.*.v1',
      'tern.task.cancelled.*.v1',
      'tern.task.submitted.*.v1',
      'tern.workspace.*.task.submit.v1',
    ]);
    for (const a of open) {
      expect(a.contract.subject.split('.').filter((t) => t === '*')).toHaveLength(1);
      expect(a.byMachine).toBe(false);
      expect(a.contract.machineIdField).toBeUndefined();
    }
  });

  it('names every bucket and object store exactly once, its owner among its users', () => {
    const listed = BUCKET_ACCESS.map((b) => b.bucket.name);
    expect(new Set(listed).size).toBe(listed.length);
    expect(bucketSpecs.map((b) => b.name).sort()).toEqual([...listed].sort());
    for (const b of BUCKET_ACCESS) expect([...b.write, ...b.read]).toContain(b.bucket.owner);
  });

  it('lets a machine use no subject with another machine id in it (a new exception must be listed here)', () => {
    expect(AGENT_UNSCOPED.map((c) => c.subject)).toEqual([]);
  });

  it('marks a subject as the machine id only where its third token is a wildcard', () => {
    for (const a of CONTRACT_ACCESS.filter((x) => x.byMachine)) expect(a.contract.subject.split('.')[2]).toBe('*');
  });
});
