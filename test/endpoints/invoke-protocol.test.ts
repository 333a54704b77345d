import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { INVOKE, type InvokeHead } from '#tern/contracts';
import { bodiesStore, connectNats, invoke, InvokeError, Messaging, Namespace, serveInvoke, type InvokeRequestHead } from '#tern/messaging';
import { deleteNamespaces } from '../support/nats.js';
import { TEST_NATS, uniqueName } from '../support/isolation.js';

const quiet = new Logger('test');
const MACHINE = 'm-invoke';
/** A container of the test machine, as invoke() and serveInvoke() name it. */
const on = (containerId: string) => ({ machineId: MACHINE, containerId });
quiet.log = quiet.warn = quiet.error = () => undefined;

async function collect(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const p of body) parts.push(p);
  return Buffer.concat(parts);
}

async function waitUntil(ok: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`not so within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function request(over: Partial<InvokeRequestHead> = {}): InvokeRequestHead {
  return {
    requestId: `r${Math.random().toString(36).slice(2)}`,
    deploymentId: 'd1',
    method: 'POST',
    path: '/?x=1',
    headers: { 'content-type': 'application/octet-stream' },
    timeoutMs: 5000,
    ...over,
  };
}

describe('invoke protocol over core NATS', () => {
  let nc: NatsConnection;
  let messaging: Messaging;
  const ns = uniqueName('invoke');

  beforeAll(async () => {
    nc = await connectNats({ ...TEST_NATS, name: 'invoke-test' }, quiet);
    messaging = new Messaging(nc, new Namespace(ns));
  });
  afterAll(async () => {
    await nc.close();
    await deleteNamespaces(ns);
  });

  it('echoes a small body with status, headers and the head the server saw', async () => {
    let seen: InvokeHead | undefined;
    const sub = serveInvoke(messaging, on('c-small'), async (head, body) => {
      seen = head;
      return { status: 201, headers: { 'x-echo': 'yes', 'content-type': 'text/plain; charset=utf-8' }, body };
    });
    try {
      const res = await invoke(messaging, on('c-small'), request({ headers: { 'x-name': 'zoë' } }), Buffer.from('hello'));
      expect(res.status).toBe(201);
      expect(res.headers).toEqual({ 'x-echo': 'yes', 'content-type': 'text/plain; charset=utf-8' });
      expect((await collect(res.body)).toString()).toBe('hello');
      expect(seen).toMatchObject({ path: '/?x=1', method: 'POST', bodyBytes: 5, headers: { 'x-name': 'zoë' } });
      expect(seen?.bodyRef).toBeUndefined();
    } finally {
      sub.unsubscribe();
    }
  });

  it('carries 5 MB both ways, the request through the bodies object store, which is emptied after', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
    let ref: string | undefined;
    const sub = serveInvoke(messaging, on('c-big'), async (head, body) => {
      ref = head.bodyRef;
      return { status: 200, headers: {}, body };
    });
    try {
      const req = request();
      const res = await invoke(messaging, on('c-big'), req, big);
      const back = await collect(res.body);
      expect(ref).toBe(req.requestId);
      expect(back.equals(big)).toBe(true);
      const store = await bodiesStore(messaging);
      await new Promise((r) => setTimeout(r, 200));
      const left = await store.info(req.requestId);
      expect(left === null || left.deleted).toBe(true);
    } finally {
      sub.unsubscribe();
    }
  });

  it('streams chunks to the caller before the handler has finished', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const sub = serveInvoke(messaging, on('c-stream'), async () => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      body: (async function* () {
        yield Buffer.from('data: one\n\n');
        await gate;
        yield Buffer.from('data: two\n\n');
      })(),
    }));
    try {
      const res = await invoke(messaging, on('c-stream'), request({ method: 'GET' }), new Uint8Array());
      const it = res.body[Symbol.asyncIterator]();
      const first = await it.next();
      expect(Buffer.from(first.value).toString()).toBe('data: one\n\n');
      release();
      const second = await it.next();
      expect(Buffer.from(second.value).toString()).toBe('data: two\n\n');
      expect((await it.next()).done).toBe(true);
    } finally {
      sub.unsubscribe();
    }
  });

  it("cancels on the server when the caller aborts or leaves the body unread: the handler's signal fires with 499 at once", async () => {
    const cancelled: { at: number; reason: unknown }[] = [];
    const sub = serveInvoke(messaging, on('c-cancel'), async (_h, _b, signal) => {
      signal.addEventListener('abort', () => cancelled.push({ at: Date.now(), reason: signal.reason }));
      return {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        // A chunk every 50 ms for 10 s, unless stopped.
        body: (async function* () {
          for (let i = 0; i < 200 && !signal.aborted; i++) {
            yield Buffer.from(`data: ${i}\n\n`);
            await new Promise((r) => setTimeout(r, 50));
          }
        })(),
      };
    });
    try {
      const abort = new AbortController();
      const res = await invoke(messaging, on('c-cancel'), request({ timeoutMs: 30_000 }), new Uint8Array(), { signal: abort.signal });
      const it = res.body[Symbol.asyncIterator]();
      await it.next();
      const abortedAt = Date.now();
      abort.abort(new InvokeError(504, 'idle limit passed'));
      await expect(it.next()).rejects.toMatchObject({ code: 504, message: 'idle limit passed' });
      await waitUntil(() => cancelled.length === 1);
      expect(cancelled[0].at - abortedAt).toBeLessThan(500);
      expect(cancelled[0].reason).toMatchObject({ code: 499 });

      // A reader that stops reading: the iterator's return() is the cancel.
      const left = await invoke(messaging, on('c-cancel'), request({ timeoutMs: 30_000 }), new Uint8Array());
      for await (const _chunk of left.body) break;
      const leftAt = Date.now();
      await waitUntil(() => cancelled.length === 2);
      expect(cancelled[1].at - leftAt).toBeLessThan(500);
    } finally {
      sub.unsubscribe();
    }
  });

  it('rejects with 503 when no agent serves the container', async () => {
    await expect(invoke(messaging, on('c-nobody'), request(), new Uint8Array())).rejects.toMatchObject({ code: 503 });
  });

  it('answers 504 when the handler outlives the timeout, and fails fast (502) when the server goes silent', async () => {
    const sub = serveInvoke(messaging, on('c-slow'), async (_h, _b, signal) => {
      await new Promise((r) => signal.addEventListener('abort', r));
      throw new Error('aborted');
    });
    const silent = nc.subscribe(messaging.subject(INVOKE, [MACHINE, 'c-silent']), { callback: () => undefined });
    try {
      const slow = invoke(messaging, on('c-slow'), request({ timeoutMs: 300 }), new Uint8Array());
      await expect(slow).rejects.toMatchObject({ code: 504, message: expect.stringContaining('300 ms') });
      const none = invoke(messaging, on('c-silent'), request({ timeoutMs: 300 }), new Uint8Array(), { idleTimeoutMs: 400 });
      await expect(none).rejects.toBeInstanceOf(InvokeError);
      await expect(none).rejects.toMatchObject({ code: 502, message: expect.stringContaining('stopped answering') });
    } finally {
      sub.unsubscribe();
      silent.unsubscribe();
    }
  });

  it('keeps a slow request alive with keepalives past the silence limit', async () => {
    const sub = serveInvoke(messaging, on('c-patient'), async () => {
      await new Promise((r) => setTimeout(r, 4000));
      return { status: 200, headers: {}, body: new TextEncoder().encode('done') };
    });
    try {
      const res = await invoke(messaging, on('c-patient'), request({ timeoutMs: 10_000 }), new Uint8Array());
      expect(res.status).toBe(200);
      const parts: Uint8Array[] = [];
      for await (const p of res.body) parts.push(p);
      expect(Buffer.concat(parts).toString()).toBe('done');
    } finally {
      sub.unsubscribe();
    }
  });

  it('answers 400 to an invalid head and 500 when the handler throws, without calling it for the former', async () => {
    let calls = 0;
    const sub = serveInvoke(messaging, on('c-err'), async () => {
      calls++;
      throw new Error('boom');
    });
    try {
      const bad = await nc.request(messaging.subject(INVOKE, [MACHINE, 'c-err']), new Uint8Array(), {
        timeout: 2000,
        headers: (() => {
          const h = natsHeaders();
          h.set('Tern-Invoke', JSON.stringify({ requestId: 'x', method: 'BREW' }));
          return h;
        })(),
      });
      expect(bad.headers?.get('Tern-Error-Code')).toBe('400');
      expect(bad.headers?.get('Tern-Error')).toContain('method');
      expect(calls).toBe(0);
      await expect(invoke(messaging, on('c-err'), request(), new Uint8Array())).rejects.toMatchObject({
        code: 500,
        message: expect.stringContaining('boom'),
      });
      expect(calls).toBe(1);
    } finally {
      sub.unsubscribe();
    }
  });

  it('ends with 502 when a streamed response passes 16 MiB', async () => {
    const sub = serveInvoke(messaging, on('c-huge'), async () => ({
      status: 200,
      headers: {},
      body: (async function* () {
        for (let i = 0; i < 20; i++) yield new Uint8Array(1024 * 1024);
      })(),
    }));
    try {
      const res = await invoke(messaging, on('c-huge'), request(), new Uint8Array());
      await expect(collect(res.body)).rejects.toMatchObject({ code: 502 });
    } finally {
      sub.unsubscribe();
    }
  });
});
