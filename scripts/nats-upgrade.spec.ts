import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adoptAnonymousStreams } from './lib/nats-upgrade.mjs';

const ACCOUNT = 'ATERNACCOUNTPUBLICKEY';

describe('adoptAnonymousStreams (a .tern/ from before operator mode)', () => {
  let store: string;
  const stream = (account: string, name: string, data: string) => {
    const dir = join(store, 'jetstream', account, 'streams', name);
    mkdirSync(join(dir, 'msgs'), { recursive: true });
    writeFileSync(join(dir, 'meta.inf'), data);
  };
  const meta = (account: string, name: string) => readFileSync(join(store, 'jetstream', account, 'streams', name, 'meta.inf'), 'utf8');

  beforeEach(() => {
    store = mkdtempSync(join(tmpdir(), 'tern-nats-upgrade-'));
  });
  afterEach(() => rmSync(store, { recursive: true, force: true }));

  it("moves every stream of the anonymous account into the Tern account's directory and removes the empty one", () => {
    stream('$G', 'tern_TASKS', 'tasks');
    stream('$G', 'KV_tern_deployments', 'kv');
    expect(adoptAnonymousStreams(store, ACCOUNT)).toEqual({
      moved: ['KV_tern_deployments', 'tern_TASKS'],
      conflicts: [],
      from: join(store, 'jetstream', '$G', 'streams'),
      to: join(store, 'jetstream', ACCOUNT, 'streams'),
    });
    expect([meta(ACCOUNT, 'tern_TASKS'), meta(ACCOUNT, 'KV_tern_deployments')]).toEqual(['tasks', 'kv']);
    expect(existsSync(join(store, 'jetstream', '$G'))).toBe(false);
    // Done once: the next start finds nothing to move.
    expect(adoptAnonymousStreams(store, ACCOUNT)).toMatchObject({ moved: [], conflicts: [] });
  });

  it('never overwrites a stream the Tern account has already: it stays, the old one too, and both are named', () => {
    stream('$G', 'tern_TASKS', 'old tasks');
    stream('$G', 'OBJ_tern_code', 'old code');
    stream(ACCOUNT, 'tern_TASKS', 'new tasks');
    const result = adoptAnonymousStreams(store, ACCOUNT);
    expect([result.moved, result.conflicts]).toEqual([['OBJ_tern_code'], ['tern_TASKS']]);
    expect([meta('$G', 'tern_TASKS'), meta(ACCOUNT, 'tern_TASKS'), meta(ACCOUNT, 'OBJ_tern_code')]).toEqual([
      'old tasks',
      'new tasks',
      'old code',
    ]);
  });

  it('does nothing to a store made in operator mode', () => {
    stream(ACCOUNT, 'tern_TASKS', 'tasks');
    expect(adoptAnonymousStreams(store, ACCOUNT)).toMatchObject({ moved: [], conflicts: [] });
    expect(meta(ACCOUNT, 'tern_TASKS')).toBe('tasks');
  });
});
