import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { AGENT_CODE_PATH } from '#tern/contracts';
import { callGateway, type GatewayAccess, refusalOf } from '../gateway-data.js';
import { sha256Hex } from '#tern/runtime';

/** Why a bundle could not be made ready; the start fails with this message. */
export class CodeBundleError extends Error {
  override name = 'CodeBundleError';
}

/**
 * Code bundles on this machine: `<stateDir>/code/<hex>/`, fetched from the gateway (which
 * serves a bundle only to a machine a container using it is placed on) once per digest and kept (content-addressed, so a cached copy is never stale). Extraction
 * goes to a temporary directory renamed into place, so a crash mid-way leaves no half bundle
 * that a later start would trust.
 */
export class CodeBundles {
  private readonly inFlight = new Map<string, Promise<string>>();

  constructor(
    private readonly root: string,
    private readonly gateway: () => GatewayAccess,
    private readonly fetchImpl: typeof fetch = fetch,
  ) {}

  /** The host directory holding the extracted bundle of `digest` ("sha256:<hex>"). */
  ensure(digest: string): Promise<string> {
    const hex = sha256Hex(digest);
    if (!hex) return Promise.reject(new CodeBundleError(`code "${digest}" is not a sha256:<64 hex> digest`));
    let p = this.inFlight.get(hex);
    if (!p) {
      p = this.prepare(hex).finally(() => this.inFlight.delete(hex));
      this.inFlight.set(hex, p);
    }
    return p;
  }

  private async prepare(hex: string): Promise<string> {
    const dir = join(this.root, hex);
    if (await exists(dir)) return dir;
    const data = await this.fetch(hex);
    const actual = createHash('sha256').update(data).digest('hex');
    if (actual !== hex) throw new CodeBundleError(`code bundle sha256:${hex} from the gateway hashes to sha256:${actual}; refusing it`);
    await mkdir(this.root, { recursive: true, mode: 0o755 });
    const tmp = join(this.root, `.tmp-${hex}-${randomBytes(4).toString('hex')}`);
    try {
      await mkdir(join(tmp, 'app'), { recursive: true });
      const archive = join(tmp, 'bundle.tar.gz');
      await writeFile(archive, data);
      // The container runs as an unprivileged user: make everything readable, nothing writable
      // (it is mounted read-only anyway); ownership is not taken from the archive.
      const r = await execa('tar', ['-xzf', archive, '-C', join(tmp, 'app'), '--no-same-owner', '--no-same-permissions'], {
        reject: false,
        all: true,
      });
      if (r.exitCode !== 0)
        throw new CodeBundleError(`code bundle sha256:${hex} is not a tar.gz that extracts cleanly: ${(r.all ?? '').trim().slice(0, 500)}`);
      await execa('chmod', ['-R', 'a+rX,go-w', join(tmp, 'app')]);
      await chmod(join(tmp, 'app'), 0o755);
      await rename(join(tmp, 'app'), dir).catch(async (e: NodeJS.ErrnoException) => {
        // Another agent process won the race with the same content: theirs is as good.
        if (!(await exists(dir))) throw e;
      });
      return dir;
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }

  private async fetch(hex: string): Promise<Uint8Array> {
    let response: Response;
    try {
      response = await callGateway(this.gateway(), `${AGENT_CODE_PATH}/sha256:${hex}`, 300_000, this.fetchImpl);
    } catch (e) {
      throw new CodeBundleError(`code bundle sha256:${hex}: ${(e as Error).message}`);
    }
    if (!response.ok) {
      throw new CodeBundleError(
        `code bundle sha256:${hex}: the gateway answered ${await refusalOf(response)}; ` +
          'is a container using it placed on this machine, and was it uploaded with tern deploy?',
      );
    }
    return new Uint8Array(await response.arrayBuffer());
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
