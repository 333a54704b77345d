import { BadRequestException, Injectable, PayloadTooLargeException, UnsupportedMediaTypeException } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { CODE_BUNDLE_MAX_BYTES } from '#tern/contracts';
import { CodeBundlesRepository } from '#tern/persistence';
import { CodeStore } from './code-store.js';
import { readBounded } from '../read-bounded.js';

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
    const bundle = await readBounded(body, CODE_BUNDLE_MAX_BYTES, tooLarge);
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
