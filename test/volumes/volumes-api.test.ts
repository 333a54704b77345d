import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { runningGateway } from '../support/gateway.js';
import { waitFor } from '../support/processes.js';
import { generated, memoryOf } from '../support/volume-bytes.js';
import { client, tern } from '../machines/harness.js';

const OPERATOR = `tern_${'v'.repeat(43)}`;
const MiB = 2 ** 20;
/** The large file's size: 300 MiB here (VOLUME_TEST_BIG_MIB=1024 measures a 1 GiB one). */
const BIG_BYTES = Number(process.env.VOLUME_TEST_BIG_MIB ?? 300) * MiB;
const QUOTA_BYTES = BIG_BYTES + 100 * MiB;
const QUOTA_FILES = 12;

async function sha256Of(stream: ReadableStream<Uint8Array>): Promise<{ hex: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const piece of stream as unknown as AsyncIterable<Uint8Array>) {
    hash.update(piece);
    size += piece.length;
  }
  return { hex: hash.digest('hex'), size };
}

/** A PUT that declares `length` bytes and sends a few: the answer comes from the length alone. */
function declaredPut(url: string, token: string, length: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', 'content-length': String(length) },
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => {
        resolve({ status: res.statusCode!, body });
        req.destroy();
      });
    });
    req.on('error', reject);
    req.write(Buffer.alloc(10));
  });
}

/**
 * Volumes over the API and the CLI: create, list, ls, put, get, rm, delete; streamed uploads and
 * downloads with the gateway's memory bounded; quotas, names, paths and other workspaces.
 */
describe('volumes API', () => {
  const gateway = runningGateway('volapi', OPERATOR, { VOLUME_QUOTA_BYTES: String(QUOTA_BYTES), VOLUME_QUOTA_FILES: String(QUOTA_FILES) });
  const call = (...args: Parameters<ReturnType<typeof client>>) => client(gateway.base)(...args);
  const tokens = { a: '', b: '' };
  let dir: string;

  const put = (token: string, volume: string, path: string, body: RequestInit['body'], headers: Record<string, string> = {}) =>
    fetch(`${gateway.base}/api/v1/volumes/${volume}/files?path=${encodeURIComponent(path)}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', ...headers },
      body,
      duplex: 'half',
    } as RequestInit);
  const get = (token: string, volume: string, path: string) =>
    fetch(`${gateway.base}/api/v1/volumes/${volume}/files?path=${encodeURIComponent(path)}`, {
      headers: { authorization: `Bearer ${token}` },
    });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tern-volumes-'));
    for (const w of ['a', 'b'] as const) {
      const made = await call('POST', '/api/v1/workspaces', OPERATOR, { name: `vol-${w}` });
      expect(made.status).toBe(201);
      tokens[w] = made.body.token as string;
    }
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('creates, lists, writes, lists files of, reads, removes from and deletes a volume', async () => {
    const created = await call('POST', '/api/v1/volumes', tokens.a, { name: 'models' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'models', version: 0, files: 0, bytes: 0 });
    expect((await call('POST', '/api/v1/volumes', tokens.a, { name: 'models' })).status).toBe(409);

    const text = Buffer.from('hello volume\n');
    const written = await put(tokens.a, 'models', '/configs/app.json', text, { 'content-length': String(text.length) });
    expect(written.status).toBe(200);
    expect(await written.json()).toMatchObject({ path: 'configs/app.json', size: text.length, chunks: 1, version: 1 });
    expect((await put(tokens.a, 'models', 'run.sh', Buffer.from('#!/bin/sh\n'), {})).status).toBe(200);
    // The same bytes again under another name: stored once (the workspace's stored bytes do not grow).
    const before = (await call('GET', '/api/v1/volumes', tokens.a)).body.usage.bytes as number;
    expect((await put(tokens.a, 'models', 'configs/copy.json', text)).status).toBe(200);
    const list = await call('GET', '/api/v1/volumes', tokens.a);
    expect(list.body.usage).toMatchObject({ bytes: before, files: 3, quotaBytes: QUOTA_BYTES, quotaFiles: QUOTA_FILES });
    expect(list.body.volumes).toEqual([expect.objectContaining({ name: 'models', files: 3, bytes: 2 * text.length + 10, version: 3 })]);

    const root = await call('GET', '/api/v1/volumes/models/ls', tokens.a);
    expect(root.body.directories).toEqual([{ path: 'configs', files: 2 }]);
    expect(root.body.files).toEqual([expect.objectContaining({ path: 'run.sh', size: 10, mode: '0644' })]);
    const configs = await call('GET', '/api/v1/volumes/models/ls?path=configs', tokens.a);
    expect(configs.body.files.map((f: { path: string }) => f.path)).toEqual(['configs/app.json', 'configs/copy.json']);

    const read = await get(tokens.a, 'models', 'configs/app.json');
    expect(read.status).toBe(200);
    expect(Buffer.from(await read.arrayBuffer()).equals(text)).toBe(true);

    const removed = await call('DELETE', '/api/v1/volumes/models/files?path=configs', tokens.a);
    expect(removed.status).toBe(200);
    expect(removed.body).toMatchObject({ removed: 2, version: 4 });
    expect((await get(tokens.a, 'models', 'configs/app.json')).status).toBe(404);
    expect((await call('GET', '/api/v1/volumes/models', tokens.a)).body).toMatchObject({ files: 1, version: 4 });

    expect((await call('DELETE', '/api/v1/volumes/models', tokens.a)).status).toBe(204);
    expect((await call('GET', '/api/v1/volumes/models', tokens.a)).status).toBe(404);
  });

  it('refuses names that are not names and paths that escape the volume, saying what to fix', async () => {
    for (const name of ['Models', '-x', 'a/b', 'a'.repeat(64), '']) {
      const res = await call('POST', '/api/v1/volumes', tokens.a, { name });
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body.message)).toMatch(/lower-case letters, digits or -/);
    }
    expect((await call('POST', '/api/v1/volumes', tokens.a, { name: 'paths' })).status).toBe(201);
    for (const path of ['../etc/passwd', '/a/../../b', 'a/./b', '']) {
      const res = await put(tokens.a, 'paths', path, Buffer.from('x'));
      expect(res.status).toBe(400);
      expect(JSON.stringify(((await res.json()) as { message: unknown }).message)).toMatch(
        /escapes the volume|segment: write the path without it|give a path/,
      );
    }
    expect((await call('GET', '/api/v1/volumes/paths/ls?path=..', tokens.a)).status).toBe(400);
    expect((await call('DELETE', '/api/v1/volumes/paths/files?path=x/../..', tokens.a)).status).toBe(400);
    const badMode = await put(tokens.a, 'paths', 'x', Buffer.from('x'), {});
    expect(badMode.status).toBe(200);
    const mode = await fetch(`${gateway.base}/api/v1/volumes/paths/files?path=y&mode=999`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${tokens.a}`, 'content-type': 'application/octet-stream' },
      body: Buffer.from('y'),
    });
    expect(mode.status).toBe(400);
  });

  it("answers 404 for another workspace's volume by name, everywhere", async () => {
    expect((await call('POST', '/api/v1/volumes', tokens.a, { name: 'secret' })).status).toBe(201);
    expect((await put(tokens.a, 'secret', 'key.txt', Buffer.from('a secret'))).status).toBe(200);
    expect((await call('GET', '/api/v1/volumes/secret', tokens.b)).status).toBe(404);
    expect((await call('GET', '/api/v1/volumes/secret/ls', tokens.b)).status).toBe(404);
    expect((await get(tokens.b, 'secret', 'key.txt')).status).toBe(404);
    expect((await put(tokens.b, 'secret', 'key.txt', Buffer.from('b overwrites'))).status).toBe(404);
    expect((await call('DELETE', '/api/v1/volumes/secret/files?path=key.txt', tokens.b)).status).toBe(404);
    expect((await call('DELETE', '/api/v1/volumes/secret', tokens.b)).status).toBe(404);
    expect((await call('GET', '/api/v1/volumes', tokens.b)).body.volumes).toEqual([]);
    // B may have a volume of the same name: its own, empty.
    expect((await call('POST', '/api/v1/volumes', tokens.b, { name: 'secret' })).status).toBe(201);
    expect((await call('GET', '/api/v1/volumes/secret', tokens.b)).body.files).toBe(0);
    const mine = await get(tokens.a, 'secret', 'key.txt');
    expect(await mine.text()).toBe('a secret');
  });

  it('refuses a deployment that mounts a volume the workspace lacks, or mounts one where no volume can go', async () => {
    const deploy = (token: string, volumes: unknown[]) =>
      call('POST', '/api/v1/deployments', token, { name: 'mounts', kind: 'endpoint', command: ['python3', '-c', 'pass'], volumes });
    // A's "paths" is not B's to mount: the same answer as a volume nobody has.
    for (const name of ['nobodys', 'paths']) {
      const res = await deploy(tokens.b, [{ name, path: '/data' }]);
      expect(res.status).toBe(400);
      expect(String(res.body.message)).toMatch(
        new RegExp(`volume ${name} not found in workspace "vol-b": create it first \\(tern volume create ${name}\\)`),
      );
    }
    expect((await call('POST', '/api/v1/volumes', tokens.b, { name: 'mine' })).status).toBe(201);
    for (const [volumes, fix] of [
      [[{ name: 'mine', path: '/' }], /not its root/],
      [[{ name: 'mine', path: '/a/../etc' }], /without "\." or "\.\." segments/],
      [[{ name: 'mine', path: 'relative' }], /must be an absolute path/],
      [[{ name: 'mine', path: '/a', read_only: 'yes' }], /read_only must be true or false/],
      [
        [
          { name: 'mine', path: '/a' },
          { name: 'mine', path: '/b' },
        ],
        /a second time: mount it once/,
      ],
    ] as const) {
      const res = await deploy(tokens.b, [...volumes]);
      expect(res.status).toBe(400);
      expect(String(res.body.message)).toMatch(fix);
    }
    expect((await deploy(tokens.b, [{ name: 'mine', path: '/data', mode: 'ro' }])).status).toBe(201);
  });

  it(`streams a file much larger than a chunk through put and get with the gateway's memory bounded`, async () => {
    const size = BIG_BYTES;
    expect(size).toBeGreaterThan(50 * VOLUME_CHUNK_BYTES);
    expect((await call('POST', '/api/v1/volumes', tokens.a, { name: 'big' })).status).toBe(201);
    const pid = gateway.process.pid!;
    const start = await memoryOf(pid);
    const expected = await sha256Of(generated(size, 'big'));

    const began = Date.now();
    const written = await put(tokens.a, 'big', 'weights.bin', generated(size, 'big'), { 'content-length': String(size) });
    expect(written.status).toBe(200);
    expect(await written.json()).toMatchObject({ size, chunks: Math.ceil(size / VOLUME_CHUNK_BYTES) });
    const putSeconds = (Date.now() - began) / 1000;
    const afterPut = await memoryOf(pid);

    const read = await get(tokens.a, 'big', 'weights.bin');
    expect(read.status).toBe(200);
    expect(Number(read.headers.get('content-length'))).toBe(size);
    expect(await sha256Of(read.body!)).toEqual(expected);
    const afterGet = await memoryOf(pid);
    process.stdout.write(
      `volumes: ${size / MiB} MiB put in ${putSeconds.toFixed(1)} s; gateway RSS ${Math.round(start.now / MiB)} MiB at start, peak ${Math.round(afterPut.peak / MiB)} MiB after put, ${Math.round(afterGet.peak / MiB)} MiB after get\n`,
    );
    // Buffering the file would take 300 MiB more; a few chunks in flight take tens.
    expect(afterGet.peak - Math.max(start.peak, start.now)).toBeLessThan(150 * MiB);
  }, 600_000);

  it('refuses what would pass the quota with 413 and what to do, before and while streaming', async () => {
    const usage = (await call('GET', '/api/v1/volumes', tokens.a)).body.usage as { bytes: number };
    // Declared too large: refused before any byte is stored.
    const declared = await declaredPut(`${gateway.base}/api/v1/volumes/big/files?path=more.bin`, tokens.a, QUOTA_BYTES);
    expect(declared.status).toBe(413);
    expect(declared.body).toMatch(/VOLUME_QUOTA_BYTES/);
    // Sent without a length: refused at the chunk that passes the quota.
    const streamed = await put(tokens.a, 'big', 'more.bin', generated(QUOTA_BYTES - usage.bytes + 2 * VOLUME_CHUNK_BYTES, 'more'));
    expect(streamed.status).toBe(413);
    expect(((await streamed.json()) as { message: string }).message).toMatch(
      /over its quota of \d+ \(VOLUME_QUOTA_BYTES\): rm files or delete volumes/,
    );
    expect((await get(tokens.a, 'big', 'more.bin')).status).toBe(404);
    // What the refused upload stored before the quota stopped it is removed, not left counting.
    await waitFor('refused upload swept', async () => (await call('GET', '/api/v1/volumes', tokens.a)).body.usage.bytes === usage.bytes);

    // The file quota: small files until the count is reached.
    const listed = (await call('GET', '/api/v1/volumes', tokens.a)).body.usage as { files: number };
    for (let i = listed.files; i < QUOTA_FILES; i++)
      expect((await put(tokens.a, 'big', `small/${i}`, Buffer.from(String(i)))).status).toBe(200);
    const over = await put(tokens.a, 'big', 'small/one-more', Buffer.from('x'));
    expect(over.status).toBe(413);
    expect(((await over.json()) as { message: string }).message).toMatch(/VOLUME_QUOTA_FILES/);
    // Rewriting a file it has is no new file.
    expect((await put(tokens.a, 'big', `small/${listed.files}`, Buffer.from('again'))).status).toBe(200);
  }, 300_000);

  it('works from the CLI: create, put, ls, get, list, rm, delete', async () => {
    const local = join(dir, 'local.bin');
    const bytes = Buffer.alloc(VOLUME_CHUNK_BYTES + 12345, 'tern');
    await writeFile(local, bytes);
    const run = (...args: string[]) => tern(['volume', ...args], gateway.base, tokens.b);
    expect(await run('create', 'cli-vol')).toMatchObject({ code: 0 });
    const putOut = await run('put', 'cli-vol', local, 'data/local.bin');
    expect(putOut.stdout).toMatch(/data\/local.bin: 4\.0 MiB written to cli-vol \(version 1\)/);
    expect((await run('ls', 'cli-vol')).stdout).toMatch(/data\/\s+1 files/);
    expect((await run('ls', 'cli-vol', 'data')).stdout).toMatch(/data\/local.bin\s+4\.0 MiB\s+0644/);
    const back = join(dir, 'back.bin');
    expect((await run('get', 'cli-vol', 'data/local.bin', back)).code).toBe(0);
    expect((await readFile(back)).equals(bytes)).toBe(true);
    expect((await run('list')).stdout).toMatch(/cli-vol\s+1\s+4\.0 MiB\s+1/);
    const escape = await run('put', 'cli-vol', local, '../up');
    expect(escape.code).toBe(1);
    expect(escape.stderr).toMatch(/400 path "..\/up" escapes the volume/);
    expect((await run('rm', 'cli-vol', 'data')).stdout).toMatch(/1 files removed from cli-vol \(version 2\)/);
    expect((await run('delete', 'cli-vol')).stdout).toMatch(/volume cli-vol deleted/);
    expect((await run('ls', 'cli-vol')).stderr).toMatch(/404 volume cli-vol not found/);
  }, 120_000);
});
