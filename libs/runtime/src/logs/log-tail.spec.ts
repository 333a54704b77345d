import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tailLogs } from './log-tail.js';

describe('tailLogs', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tern-tail-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('yields lines as they are appended and ends once the writer is finished and drained', async () => {
    const out = join(dir, 'stdout.log');
    const err = join(dir, 'stderr.log');
    await writeFile(out, 'one\ntw');
    await writeFile(err, '');
    let finished = false;
    const seen: string[] = [];
    const reader = (async () => {
      for await (const l of tailLogs(
        'c1',
        [
          { stream: 'stdout', path: out },
          { stream: 'stderr', path: err },
        ],
        { isFinished: async () => finished, pollMs: 5 },
      )) {
        seen.push(`${l.stream}:${l.line}`);
      }
    })();
    await new Promise((r) => setTimeout(r, 30));
    expect(seen).toEqual(['stdout:one']);
    await appendFile(out, 'o\nthree\r\n');
    await appendFile(err, 'bad\n');
    await appendFile(out, 'no newline at exit');
    finished = true;
    await reader;
    expect(seen).toEqual(['stdout:one', 'stdout:two', 'stdout:three', 'stderr:bad', 'stdout:no newline at exit']);
  });

  it('reads what is there and stops when not following', async () => {
    const out = join(dir, 'stdout.log');
    await writeFile(out, 'a\nb\n');
    const lines = [];
    for await (const l of tailLogs(
      'c1',
      [
        { stream: 'stdout', path: out },
        { stream: 'stderr', path: join(dir, 'missing') },
      ],
      { follow: false, isFinished: async () => false },
    )) {
      lines.push(l.line);
    }
    expect(lines).toEqual(['a', 'b']);
  });

  it('cuts a runaway line and keeps multi-byte characters whole across reads', async () => {
    const out = join(dir, 'stdout.log');
    await writeFile(out, `${'x'.repeat(25)}\n${'é'.repeat(40_000)}\n`);
    const lines = [];
    for await (const l of tailLogs('c1', [{ stream: 'stdout', path: out }], {
      follow: false,
      isFinished: async () => true,
      maxLineChars: 10,
    }))
      lines.push(l.line);
    expect(lines.slice(0, 3)).toEqual(['x'.repeat(10), 'x'.repeat(10), 'x'.repeat(5)]);
    expect(lines.slice(3).join('')).toBe('é'.repeat(40_000));
  });

  it('stops when aborted', async () => {
    const out = join(dir, 'stdout.log');
    await writeFile(out, 'a\n');
    const ac = new AbortController();
    const lines = [];
    setTimeout(() => ac.abort(), 30);
    for await (const l of tailLogs('c1', [{ stream: 'stdout', path: out }], {
      isFinished: async () => false,
      signal: ac.signal,
      pollMs: 5,
    }))
      lines.push(l.line);
    expect(lines).toEqual(['a']);
  });
});
