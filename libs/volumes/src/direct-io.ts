import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';

/**
 * A site cache's blob files are read and written with direct I/O (`O_DIRECT`): the bytes go
 * between its reused buffers and the disk without passing through the page cache. A blob is
 * written once and then read by machines at their own pace; through the page cache every byte
 * it keeps takes a fresh page of memory, which is where most of a cache's CPU went (on a VM
 * whose memory the host reclaims when free, a fresh page is a fault into the host:
 * bench/model-start/README.md), and which crowds what the host's other processes keep cached.
 *
 * Direct I/O wants the memory, the file offset and the length aligned to the device's block
 * (4096 covers every device a cache runs on). Node has no aligned allocation, so the buffers
 * come from WebAssembly memory, which V8 maps in whole pages (`alignedBuffers`). A filesystem
 * that refuses `O_DIRECT` (tmpfs on older kernels) gets buffered I/O through the same calls.
 */
export const DIRECT_ALIGN = 4096;

/** A file opened for direct I/O where its filesystem allows, else buffered; `direct` says which. */
export interface BlobFile {
  file: FileHandle;
  direct: boolean;
}

/** Opens `path` (`'w+'`: created anew, read and written; `'r'`: read) with direct I/O where its filesystem allows. */
export async function openBlobFile(path: string, how: 'w+' | 'r', mode = 0o600): Promise<BlobFile> {
  const flags = how === 'r' ? constants.O_RDONLY : constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC;
  try {
    return { file: await open(path, flags | constants.O_DIRECT, mode), direct: true };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EINVAL') throw e;
    return { file: await open(path, flags, mode), direct: false };
  }
}

/**
 * Bytes `[position, position + length)` of the file (fewer at its end), read into `buffer` (from
 * `alignedBuffers`, at least `length + DIRECT_ALIGN` long for a direct file): the part of
 * `buffer` holding them. A direct read covers the aligned blocks around the range, so the bytes
 * read lie `position % DIRECT_ALIGN` into the buffer.
 */
export async function readAt(blob: BlobFile, buffer: Buffer, position: number, length: number): Promise<Buffer> {
  const skip = blob.direct ? position % DIRECT_ALIGN : 0;
  const span = blob.direct ? alignUp(skip + length) : length;
  if (span > buffer.length) throw new RangeError(`a read of ${length} bytes at ${position} needs a buffer of ${span}`);
  let got = 0;
  while (got < span) {
    const { bytesRead } = await blob.file.read(buffer, got, span - got, position - skip + got);
    if (!bytesRead) break;
    got += bytesRead;
    // A direct read short of a block is the file's end.
    if (blob.direct && got % DIRECT_ALIGN) break;
  }
  return buffer.subarray(skip, Math.max(skip, Math.min(got, skip + length)));
}

/**
 * Writes `bytes` (a view into an aligned buffer, starting at an aligned offset of it) at
 * `position` (aligned for a direct file). Its length must be aligned too unless it ends the
 * file: then the buffer's bytes past it are written up to the next block (the buffer must reach
 * that far) and the caller truncates the file to its size.
 */
export async function writeAt(blob: BlobFile, bytes: Buffer, position: number): Promise<void> {
  const span = blob.direct ? alignUp(bytes.length) : bytes.length;
  const piece = span === bytes.length ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, span);
  for (let done = 0; done < span;) done += (await blob.file.write(piece, done, span - done, position + done)).bytesWritten;
}

export function alignDown(n: number): number {
  return n - (n % DIRECT_ALIGN);
}

export function alignUp(n: number): number {
  return alignDown(n + DIRECT_ALIGN - 1);
}

/** The one part of WebAssembly used here (the project's TypeScript libs declare none of it). */
declare const WebAssembly: {
  Memory: new (descriptor: { initial: number; maximum: number; shared: true }) => { buffer: SharedArrayBuffer };
};

/** WebAssembly's page: its memories are mapped in whole pages of this size, so each starts page-aligned. */
const WASM_PAGE = 65_536;

/**
 * `count` buffers of `size` bytes (a multiple of DIRECT_ALIGN), each starting at an address
 * aligned for direct I/O, over one shared memory (so `sha256Of` and `sha256Stream` read them
 * without a copy). The memory is never given back while any of them is held.
 */
export function alignedBuffers(size: number, count: number): Buffer[] {
  if (size % DIRECT_ALIGN) throw new RangeError(`aligned buffers are multiples of ${DIRECT_ALIGN} bytes, not ${size}`);
  const pages = Math.ceil((size * count) / WASM_PAGE);
  const memory = Buffer.from(new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true }).buffer);
  return Array.from({ length: count }, (_, i) => memory.subarray(i * size, (i + 1) * size));
}
