import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { EXEC_OUTPUT_CHUNK_BYTES, SUPERVISED_EXEC_SCRIPT, supervisedExecArgs } from '#tern/runtime';
import { ExecOutputReader } from './exec-output.js';

/** The supervisor as the runtime starts it, with `sh -c <script>` in runc exec's place. */
async function supervise(dir: string, script: string): Promise<void> {
  await execa('/bin/sh', ['-c', SUPERVISED_EXEC_SCRIPT, ...supervisedExecArgs(dir, '/bin/sh', ['-c', script])], { stdin: 'ignore' });
}

async function readAll(reader: ExecOutputReader): Promise<string> {
  let text = '';
  for (let piece = await reader.read(); piece !== undefined; piece = await reader.read()) text += piece;
  return text + (await reader.end());
}

describe('supervised exec output', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tern-exec-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps each stream in order and writes the exit status once both are on disk', async () => {
    await supervise(dir, 'echo out; echo err >&2; printf "é"; exit 7');
    expect(await readFile(join(dir, 'exit'), 'utf8')).toBe('7\n');
    expect(await readAll(new ExecOutputReader(dir, 'stdout'))).toBe('out\né');
    expect(await readAll(new ExecOutputReader(dir, 'stderr'))).toBe('err\n');
  });

  it('holds at most two chunks of a stream on disk, and a late reader starts at the oldest left', async () => {
    const chunks = 5;
    await supervise(dir, `head -c ${chunks * EXEC_OUTPUT_CHUNK_BYTES - 4} /dev/zero | tr '\\0' x; echo end`);
    expect((await readdir(dir)).filter((f) => f.startsWith('stdout.')).sort()).toEqual(['stdout.000003', 'stdout.000004']);
    const text = await readAll(new ExecOutputReader(dir, 'stdout'));
    expect(text.length).toBe(2 * EXEC_OUTPUT_CHUNK_BYTES);
    expect(text.endsWith('xxend\n')).toBe(true);
    expect(await readAll(new ExecOutputReader(dir, 'stderr'))).toBe('');
  });
});
