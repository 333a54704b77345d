import type { NatsConnection } from '@nats-io/transport-node';
import { type KV, Kvm } from '@nats-io/kv';
import { KvMirror } from '#tern/messaging';
import { connectTestNats, deleteNamespaces } from '../support/nats.js';
import { runPrefix, uniqueName } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';

const quiet = { warn: () => undefined };

describe('KvMirror on a real bucket', () => {
  let nc: NatsConnection;
  const prefix = `${runPrefix()}kvm`;
  const mirrors: KvMirror<unknown>[] = [];

  beforeAll(async () => {
    nc = await connectTestNats();
  });

  afterEach(async () => {
    await Promise.all(mirrors.splice(0).map((m) => m.stop()));
  });

  afterAll(async () => {
    await nc?.close();
    await deleteNamespaces(prefix);
  });

  async function bucket(name = `${prefix}${uniqueName('b')}`): Promise<KV> {
    return new Kvm(nc).create(name, { history: 1 });
  }

  function mirror<T>(kv: KV | (() => Promise<KV>), options: Partial<ConstructorParameters<typeof KvMirror<T>>[0]> = {}): KvMirror<T> {
    const m = new KvMirror<T>({
      bucket: 'test',
      open: typeof kv === 'function' ? kv : async () => kv,
      logger: quiet,
      reopenAfterMs: 50,
      ...options,
    });
    mirrors.push(m as KvMirror<unknown>);
    return m.start();
  }

  it('is ready after the values present at start, then follows puts and deletes', async () => {
    const kv = await bucket();
    await kv.put('a', JSON.stringify({ n: 1 }));
    await kv.put('b', JSON.stringify({ n: 2 }));
    const m = mirror<{ n: number }>(kv);
    expect(await m.ready(5000)).toBe(true);
    expect(m.get('a')).toEqual({ n: 1 });
    expect(m.size).toBe(2);

    await kv.put('a', JSON.stringify({ n: 3 }));
    await kv.delete('b');
    await waitFor('the change', async () => m.get('a')?.n === 3 && m.get('b') === undefined, 5000, 20);
    expect(m.size).toBe(1);
  });

  it('is ready at once on an empty bucket, and tells every change with the value it replaced', async () => {
    const kv = await bucket();
    const changes: [string, unknown, unknown][] = [];
    const m = mirror<number>(kv, { onChange: (key, value, old) => changes.push([key, value, old]) });
    expect(await m.ready(5000)).toBe(true);
    await kv.put('x', '1');
    await kv.put('x', '2');
    await kv.purge('x');
    await waitFor('three changes', async () => changes.length === 3, 5000, 20);
    expect(changes).toEqual([
      ['x', 1, undefined],
      ['x', 2, 1],
      ['x', undefined, 2],
    ]);
  });

  it('leaves out what decode refuses and keeps the old value over an unreadable entry', async () => {
    const kv = await bucket();
    const m = mirror<number>(kv, { decode: (_key, e) => (e.json<number>() > 0 ? e.json<number>() : undefined) });
    await m.ready(5000);
    await kv.put('p', '5');
    await kv.put('q', '-1');
    await waitFor('p', async () => m.get('p') === 5, 5000, 20);
    await kv.put('p', 'not json');
    await kv.put('r', '7');
    await waitFor('r', async () => m.get('r') === 7, 5000, 20);
    expect(m.get('p')).toBe(5);
    expect(m.get('q')).toBeUndefined();
  });

  it('reopens a failed watch, and drops keys that went away meanwhile without a delete marker', async () => {
    const name = `${prefix}${uniqueName('b')}`;
    const kv = await bucket(name);
    await kv.put('stays', '1');
    await kv.put('goes', '2');
    let current = kv;
    let opens = 0;
    let fail = false;
    const m = mirror<number>(async () => {
      opens++;
      if (fail) throw new Error('NATS away');
      return current;
    });
    await m.ready(5000);
    expect(m.size).toBe(2);

    // The watch ends (as when the connection drops) and the next open fails once; meanwhile the
    // bucket is deleted and made again (a TTL that expired the key, its marker included, is alike).
    fail = true;
    (m as unknown as { watch: { stop(): void } }).watch.stop();
    await current.destroy();
    current = await bucket(name);
    await current.put('stays', '1');
    await waitFor('a failed reopen', async () => opens >= 2, 5000, 10);
    fail = false;
    await waitFor('the reopened watch', async () => opens >= 3 && m.get('goes') === undefined, 5000, 20);
    expect(m.get('stays')).toBe(1);
    await current.put('new', '3');
    await waitFor('a change after the reopen', async () => m.get('new') === 3, 5000, 20);
  });

  it('answers ready(timeout) false while the bucket cannot be opened', async () => {
    const m = mirror<number>(async () => {
      throw new Error('no bucket');
    });
    expect(await m.ready(100)).toBe(false);
    expect(m.isLoaded).toBe(false);
  });
});
