import { mkdir } from 'node:fs/promises';
import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { type BodyPieces, type Sha256Stream, sha256Stream, sharedBuffer, type StreamedBody } from '#tern/volumes';
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

/**
 * A layer's bytes go to the hash and the decompressor in pieces of this size, a few per layer on
 * their way at once: one write to the pipe and one message to the hashing thread per MiB, not per
 * 64 KiB read, and at most PIECES MiB of a layer in memory.
 */
const PIECE_BYTES = 1 << 20;
const PIECES = 8;

/** Padding to a 512-byte block and two end blocks, with room to spare. */
const TAR_END_ZEROS = 10_240;

/**
 * How each layer type is decompressed. zstd: by its own program, piped straight into tar (tar's
 * own --zstd adds a process copying between them). gzip: in this process, by node's zlib on
 * libuv's threads, its output written into tar: GNU gzip's inflate took about twice the CPU per
 * byte (Tern's base layer, 66 MB: `gzip -dc` 0.92–0.96 CPU-s, node's zlib 0.47–0.60), and a
 * CUDA or PyTorch image from a public registry is gzip throughout.
 */
const DECOMPRESS: Record<string, 'none' | 'gzip' | 'zstd'> = {
  'application/vnd.oci.image.layer.v1.tar': 'none',
  'application/vnd.oci.image.layer.v1.tar+gzip': 'gzip',
  'application/vnd.oci.image.layer.v1.tar+zstd': 'zstd',
  'application/vnd.docker.image.rootfs.diff.tar.gzip': 'gzip',
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

/** A layer's unpacking under way: where its bytes go, how to end or stop it, and how it ended. */
interface Unpack {
  input: Writable;
  /** Ends the layer's bytes. */
  end(): void;
  done: Promise<{ tar: Exit; decompressor?: Exit }>;
  kill(): void;
}

/**
 * `[decompressor |] tar -x` into `dir`, owners, modes and xattrs kept. Zeros follow the layer's
 * tar: umoci 0.4 (`umoci insert`, sandbox snapshots) ends its layers without the last entry's
 * padding and the two end blocks, which GNU tar takes for a truncated file ("Unexpected EOF in
 * archive") and Go's reader does not. Past a whole archive's end blocks tar reads no further, so
 * the zeros change nothing there. A decompressor's failure ends the layer with no zeros after it.
 */
function startUnpack(mediaType: string, dir: string): Unpack {
  const args = ['-x', '-f', '-', '-C', dir, '--numeric-owner', '--quoting-style=c', '--xattrs', '--xattrs-include=*', '-p'];
  // 1 MiB records, read whole from the pipe: a big file is written in 1 MiB pieces, not tar's 10 KiB.
  args.push('--blocking-factor=2048', '--read-full-records');
  if (process.getuid?.() === 0) args.push('--same-owner');
  const env = { ...process.env, LC_ALL: 'C' };
  const how = DECOMPRESS[mediaType]!;
  if (how === 'zstd') {
    // The shell's decompressor's output goes to tar through a pipe between the two, never through this process.
    const dec = spawn('sh', ['-c', `zstd -dcq || exit; head -c ${TAR_END_ZEROS} /dev/zero`], { stdio: ['pipe', 'pipe', 'pipe'] });
    const tar = spawn('tar', args, { stdio: [dec.stdout!, 'ignore', 'pipe'], env });
    dec.stdout!.destroy(); // tar holds it now
    return {
      input: dec.stdin!,
      end: () => dec.stdin!.end(),
      done: Promise.all([exited(tar), exited(dec)]).then(([t, d]) => ({ tar: t, decompressor: d })),
      kill: () => {
        // The shell's decompressor ends with its input.
        dec.stdin!.destroy();
        dec.kill('SIGKILL');
        tar.kill('SIGKILL');
      },
    };
  }
  const tar = spawn('tar', args, { stdio: ['pipe', 'ignore', 'pipe'], env });
  const tarExit = exited(tar);
  if (how === 'none')
    return {
      input: tar.stdin!,
      end: () => tar.stdin!.end(Buffer.alloc(TAR_END_ZEROS)),
      done: tarExit.then((t) => ({ tar: t })),
      kill: () => tar.kill('SIGKILL'),
    };
  return gunzipInto(tar, tarExit);
}

/**
 * A gzip layer inflated by node's zlib (1 MiB out at a time) into tar's stdin, then the zeros. A
 * tar that stops reading stops the inflating (tar's complaint is the layer's failure; the layer's
 * pieces then go to the hash alone); a stream zlib refuses ends tar's input, and is the
 * decompressor's failure.
 */
function gunzipInto(tar: ChildProcess, tarExit: Promise<Exit>): Unpack {
  const gunzip = createGunzip({ chunkSize: PIECE_BYTES });
  const stdin = tar.stdin!;
  let tarStopped = false;
  const inflated = new Promise<Exit>((resolve) => {
    gunzip.on('error', (e) => {
      stdin.destroy();
      resolve(tarStopped ? { code: 0, stderr: '' } : { code: 1, stderr: `gzip: ${e.message}` });
    });
    gunzip.on('end', () => {
      stdin.end(Buffer.alloc(TAR_END_ZEROS));
      resolve({ code: 0, stderr: '' });
    });
    // Stopped (`kill`): neither of the above comes.
    gunzip.on('close', () => resolve({ code: null, stderr: 'stopped' }));
  });
  stdin.on('error', (e) => {
    tarStopped = true;
    gunzip.destroy(e);
  });
  gunzip.pipe(stdin, { end: false });
  return {
    input: gunzip,
    end: () => gunzip.end(),
    done: Promise.all([tarExit, inflated]).then(([t, d]) => ({ tar: t, decompressor: d })),
    kill: () => {
      gunzip.destroy();
      stdin.destroy();
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
 * The pieces a layer's body is read into, each sent to the hashing thread and written to the
 * decompressor as it fills, lent again once both are done with it.
 */
class LayerPieces implements BodyPieces {
  readonly hash: Sha256Stream = sha256Stream();
  /** Set when tar stopped reading (a corrupt stream, a full disk): the rest is still hashed, so a tampered blob is reported as such. */
  private tarGone = false;
  /** Pieces written to the input whose write has not called back: node's zlib never calls back the write it failed on. */
  private readonly writing = new Set<() => void>();
  /** The body, told when a piece is free again. */
  body?: StreamedBody;
  private readonly free: Buffer[] = [];
  private lent = 0;
  private busy = 0;
  private idle?: () => void;
  private hashFailure?: Error;

  constructor(private readonly input: Writable) {}

  take(): Buffer | undefined {
    if (this.free.length) return this.free.pop();
    if (this.lent === PIECES) return undefined;
    this.lent++;
    return sharedBuffer(PIECE_BYTES);
  }

  put(buffer: Buffer, n: number): void {
    const piece = buffer.subarray(0, n);
    let owed = this.tarGone ? 1 : 2;
    this.busy++;
    const back = () => {
      if (--owed > 0) return;
      this.free.push(buffer);
      if (--this.busy === 0) this.idle?.();
      this.body?.more();
    };
    this.hash.update(piece).then(back, (e: Error) => {
      this.hashFailure ??= e;
      back();
    });
    if (this.tarGone) return;
    let wrote = false;
    const written = () => {
      if (wrote) return;
      wrote = true;
      this.writing.delete(written);
      back();
    };
    this.writing.add(written);
    this.input.write(piece, written);
  }

  /** The input failed (tar or the decompressor stopped): the pieces on their way to it are free once hashed. */
  inputGone(): void {
    this.tarGone = true;
    for (const written of [...this.writing]) written();
  }

  /** Every piece put is hashed and written (or refused by a tar that stopped); its digest then. */
  async digest(): Promise<string> {
    if (this.busy) await new Promise<void>((resolve) => (this.idle = resolve));
    const hex = await this.hash.digest();
    if (this.hashFailure) throw this.hashFailure;
    return `sha256:${hex}`;
  }
}

/**
 * Unpacks one layer as it downloads: `open` starts its body into the pieces given, which run
 * through a sha256 (on a worker thread) and the decompressor into GNU tar, extracting
 * into `dir`, owners, modes and xattrs kept. The digest is checked when the body ends: a layer
 * whose bytes do not match fails, whatever tar made of them (its caller removes `dir`). Resolves
 * the hard links into lower layers tar could not make here.
 */
export async function unpackLayer(
  image: string,
  registry: string,
  layer: LayerDescriptor,
  open: (pieces: BodyPieces) => Promise<StreamedBody>,
  dir: string,
): Promise<LowerLink[]> {
  await mkdir(dir, { recursive: true });
  const tar = startUnpack(layer.mediaType, dir);
  const pieces = new LayerPieces(tar.input);
  tar.input.on('error', () => pieces.inputGone());
  let got: string;
  try {
    const body = (pieces.body = await open(pieces));
    if (body.length !== layer.size) {
      body.cancel();
      throw new ImageError(image, `${registry} sent ${body.length} bytes for layer ${layer.digest} of ${layer.size} bytes: refused`);
    }
    await body.ended.catch((e: Error) => {
      throw new ImageError(image, `${registry} stopped sending layer ${layer.digest}: ${e.message}`, { cause: e });
    });
    got = await pieces.digest();
  } catch (e) {
    tar.kill();
    await tar.done;
    pieces.digest().catch(() => undefined); // frees the hashing thread's state once the pieces in flight settle
    throw e;
  }
  tar.end();
  const r = await tar.done;
  if (got !== layer.digest) throw new ImageError(image, `layer ${layer.digest} from ${registry} has digest ${got}: refused`);
  if (r.decompressor && r.decompressor.code !== 0)
    throw new ImageError(image, `decompressing layer ${layer.digest} failed: ${r.decompressor.stderr.trim().slice(-300)}`);
  const { links, other } = lowerLinks(r.tar.stderr);
  if (r.tar.code !== 0 && (other.length || !links.length))
    throw new ImageError(image, `unpacking layer ${layer.digest} failed: ${other.slice(-4).join('\n') || `tar exited ${r.tar.code}`}`);
  return links;
}
