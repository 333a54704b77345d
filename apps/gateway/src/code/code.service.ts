import { BadRequestException, Injectable, PayloadTooLargeException, UnsupportedMediaTypeException } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { CODE_BUNDLE_MAX_BYTES } from '#tern/contracts';
import { CodeBundlesRepository } from '#tern/persistence';
import { CodeStore } from './code-store.js';

export interface CodeUploadResult {
  digest: string;
  size: number;
  /** false when this workspace had the bundle already (uploads are idempotent). */
  created: boolean;
}

@Injectable()
export class CodeService {
  constructor(
    private readonly store: CodeStore,
    private readonly bundles: CodeBundlesRepository,
  ) {}

  /** Whether the workspace has the bundle: another workspace's upload of the same bytes does not count. */
  async exists(workspaceId: string, digest: string): Promise<boolean> {
    return (await this.bundles.isOwnedBy(workspaceId, digest)) && (await this.store.info(hexOf(digest))) !== null;
  }

  /**
   * Reads the whole bundle (bounded), checks its digest, then stores it. Buffered rather than
   * streamed into the store because the object must not appear under a digest it does not
   * have, and the object store has no rename. The bytes are stored once; each workspace that
   * sends them (proving it has them) gets its claim on the digest.
   */
  async upload(
    workspaceId: string,
    digest: string,
    body: unknown,
    contentType: string | undefined,
    contentLength: string | undefined,
  ): Promise<CodeUploadResult> {
    const hex = hexOf(digest);
    if (!(body instanceof Readable)) {
      throw new UnsupportedMediaTypeException(
        `send the bundle as application/gzip or application/octet-stream (got ${contentType ?? 'no content type'})`,
      );
    }
    const declared = Number(contentLength);
    if (Number.isFinite(declared) && declared > CODE_BUNDLE_MAX_BYTES) throw tooLarge(`content-length ${declared}`);
    const bundle = await readBounded(body);
    const actual = createHash('sha256').update(bundle).digest('hex');
    if (actual !== hex) throw new BadRequestException([`digest does not match the body: the body's sha256 is ${actual}`]);
    const existing = await this.store.info(hex);
    if (!existing) await this.store.put(hex, bundle);
    const owned = await this.bundles.isOwnedBy(workspaceId, digest);
    await this.bundles.record(workspaceId, digest);
    return { digest, size: existing?.size ?? bundle.length, created: !owned };
  }
}

export function hexOf(digest: string): string {
  return digest.slice('sha256:'.length);
}

function tooLarge(detail: string): PayloadTooLargeException {
  return new PayloadTooLargeException(
    `code bundles are limited to ${CODE_BUNDLE_MAX_BYTES / 2 ** 20} MiB (${detail}); leave data and models out of the folder and load them in on_start`,
  );
}

/** Reads by hand (not for-await, which would destroy the socket and lose the 413); the rest is drained before the answer. */
function readBounded(body: Readable): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    body.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received <= CODE_BUNDLE_MAX_BYTES) return void chunks.push(chunk);
      body.pause();
      body.removeAllListeners('data');
      reject(tooLarge(`more than ${CODE_BUNDLE_MAX_BYTES} bytes sent`));
    });
    body.once('end', () => resolve(Buffer.concat(chunks)));
    body.once('error', reject);
  });
}
