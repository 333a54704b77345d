import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { mkdir } from 'node:fs/promises';
import { type ChildProcess, spawn } from 'node:child_process';
import { ImageError } from '../errors.js';

/** A layer blob as a manifest describes it. */
export interface LayerDescriptor {
  mediaType: string;
  digest: string;
  size: number;
}

/** A hard link of a layer to a file it does not hold itself (a lower layer's): made when the layers are merged. */
export interface LowerLink {
  /** Both relative to the root, as the layer's tar names them. */
  path: string;
  target: string;
}

/** Padding to a 512-byte block and two end blocks, with room to spare. */
const TAR_END_ZEROS = 10_240;

/** The decompressor of each layer type, piped straight into tar (tar's own --zstd/--gzip adds a process copying between them). */
const DECOMPRESS: Record<string, string[]> = {
  'application/vnd.oci.image.layer.v1.tar': [],
  'application/vnd.oci.image.layer.v1.tar+gzip': ['gzip', '-dc'],
  'application/vnd.oci.image.layer.v1.tar+zstd': ['zstd', '-dcq'],
  'application/vnd.docker.image.rootfs.diff.tar.gzip': ['gzip', '-dc'],
};

interface Exit {
  code: number | null;
  stderr: string;
}

function exited(child: ChildProcess): Promise<Exit> {
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (t: string) => (stderr = (stderr + t).slice(-64 << 10)));
  return new Promise((resolve) => {
    child.on('error', (e) => (stderr += e.message));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

/**
 * `[decompressor |] tar -x` into `dir`, owners, modes and xattrs kept; the decompressor's output
 * goes to tar through a pipe between the two, never through this process.
 */
function startUnpack(mediaType: string, dir: string) {
  const args = ['-x', '-f', '-', '-C', dir, '--numeric-owner', '--quoting-style=c', '--xattrs', '--xattrs-include=*', '-p'];
  // 1 MiB records, read whole from the pipe: a big file is written in 1 MiB pieces, not tar's 10 KiB.
  args.push('--blocking-factor=2048', '--read-full-records');
  if (process.getuid?.() === 0) args.push('--same-owner');
  const env = { ...process.env, LC_ALL: 'C' };
  const [program, ...flags] = DECOMPRESS[mediaType]!;
  // Zeros after the layer's tar: umoci 0.4 (`umoci insert`, sandbox snapshots) ends its layers
  // without the last entry's padding and the two end blocks, which GNU tar takes for a truncated
  // file ("Unexpected EOF in archive") and Go's reader does not. Past a whole archive's end
  // blocks tar reads no further, so the zeros change nothing there. The decompressor's own
  // failure still ends the shell with its status, and no zeros follow it.
  const dec = program
    ? spawn('sh', ['-c', `${[program, ...flags].join(' ')} || exit; head -c ${TAR_END_ZEROS} /dev/zero`], {
        stdio: ['pipe', 'pipe', 'pipe'],
      })
    : undefined;
  const tar = spawn('tar', args, { stdio: [dec ? dec.stdout! : 'pipe', 'ignore', 'pipe'], env });
  dec?.stdout?.destroy(); // tar holds it now
  const done = Promise.all([exited(tar), dec ? exited(dec) : undefined]).then(([t, d]) => ({ tar: t, decompressor: d }));
  return {
    input: (dec ?? tar).stdin!,
    /** Ends the layer's bytes: for an uncompressed layer, after the zeros the shell adds to a compressed one. */
    end: () => (dec ? dec.stdin!.end() : tar.stdin!.end(Buffer.alloc(TAR_END_ZEROS))),
    done,
    kill: () => {
      // The shell's decompressor ends with its input.
      dec?.stdin?.destroy();
      dec?.kill('SIGKILL');
      tar.kill('SIGKILL');
    },
  };
}

export function layerTypeProblem(mediaType: string): string | undefined {
  return mediaType in DECOMPRESS
    ? undefined
    : `layer type ${mediaType} is not one an agent unpacks (${Object.keys(DECOMPRESS).join(', ')})`;
}

/**
 * Reads a C-escaped string (`"…"` as --quoting-style=c writes names, `'…'` as tar quotes a link
 * target) from `text` at `at`, returning it and where it ended.
 */
function quoted(text: string, at: number): { value: string; end: number } | undefined {
  const close = text[at];
  if (close !== '"' && close !== "'") return undefined;
  const bytes: number[] = [];
  const simple: Record<string, number> = { n: 10, t: 9, r: 13, a: 7, b: 8, f: 12, v: 11, '\\': 92, '"': 34, "'": 39, '?': 63 };
  for (let i = at + 1; i < text.length; i++) {
    const c = text[i]!;
    if (c === close) return { value: Buffer.from(bytes).toString('utf8'), end: i + 1 };
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const n = text[++i] ?? '';
    const octal = /^[0-7]{1,3}/.exec(text.slice(i, i + 3))?.[0];
    if (octal) {
      bytes.push(parseInt(octal, 8));
      i += octal.length - 1;
    } else if (n in simple) bytes.push(simple[n]!);
    else return undefined;
  }
  return undefined;
}

/**
 * tar's complaints about hard links whose target is not in this layer (`tar: "./b": Cannot hard
 * link to './a': No such file or directory`): links into a lower layer, made at merge time. Any
 * other complaint is returned as is: it fails the layer.
 */
export function lowerLinks(stderr: string): { links: LowerLink[]; other: string[] } {
  const links: LowerLink[] = [];
  const other: string[] = [];
  for (const line of stderr.split('\n')) {
    if (!line.trim() || line === 'tar: Exiting with failure status due to previous errors') continue;
    const path = line.startsWith('tar: ') ? quoted(line, 5) : undefined;
    const middle = ': Cannot hard link to ';
    const target = path && line.startsWith(middle, path.end) ? quoted(line, path.end + middle.length) : undefined;
    if (path && target && line.slice(target.end) === ': No such file or directory') links.push({ path: path.value, target: target.value });
    else other.push(line);
  }
  return { links, other };
}

/**
 * Unpacks one layer as it downloads: `body` runs through a sha256 and into GNU tar (which runs the
 * decompressor) extracting into `dir`, owners, modes and xattrs kept. The digest is checked when
 * the body ends: a layer whose bytes do not match fails, whatever tar made of them (its caller
 * removes `dir`). Resolves the hard links into lower layers tar could not make here.
 */
export async function unpackLayer(
  image: string,
  registry: string,
  layer: LayerDescriptor,
  body: IncomingMessage,
  dir: string,
  onBytes?: (n: number) => void,
): Promise<LowerLink[]> {
  await mkdir(dir, { recursive: true });
  const tar = startUnpack(layer.mediaType, dir);
  const hash = createHash('sha256');
  let received = 0;
  let tarGone = false;
  tar.input.on('error', () => {
    // tar stopped reading (a corrupt stream, a full disk): the rest is still hashed, so a
    // tampered blob is reported as such rather than as whatever tar made of it.
    tarGone = true;
    body.resume();
  });
  const ended = new Promise<void>((resolve, reject) => {
    body.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      received += chunk.length;
      onBytes?.(chunk.length);
      if (!tarGone && !tar.input.write(chunk)) {
        body.pause();
        tar.input.once('drain', () => body.resume());
      }
    });
    body.on('end', () => (received === layer.size ? resolve() : reject(new Error(`ended after ${received} of ${layer.size} bytes`))));
    const cut = () => reject(new Error(`stopped sending after ${received} of ${layer.size} bytes`));
    body.on('aborted', cut);
    body.on('close', cut);
    body.on('error', (e: NodeJS.ErrnoException) =>
      reject(new Error(`stopped sending after ${received} of ${layer.size} bytes (${e.code ?? e.message})`)),
    );
  });
  try {
    await ended;
  } catch (e) {
    tar.kill();
    await tar.done;
    throw new ImageError(image, `${registry} ${(e as Error).message} of layer ${layer.digest}`, { cause: e });
  }
  tar.end();
  const r = await tar.done;
  const got = `sha256:${hash.digest('hex')}`;
  if (got !== layer.digest) throw new ImageError(image, `layer ${layer.digest} from ${registry} has digest ${got}: refused`);
  if (r.decompressor && r.decompressor.code !== 0)
    throw new ImageError(image, `decompressing layer ${layer.digest} failed: ${r.decompressor.stderr.trim().slice(-300)}`);
  const { links, other } = lowerLinks(r.tar.stderr);
  if (r.tar.code !== 0 && (other.length || !links.length))
    throw new ImageError(image, `unpacking layer ${layer.digest} failed: ${other.slice(-4).join('\n') || `tar exited ${r.tar.code}`}`);
  return links;
}
