import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Subscription } from '@nats-io/transport-node';
import { execa } from 'execa';
import { AGENT_IMAGE_BUILD, ImageBuildCommand, type ImageBuildEvent, type InvokeHead } from '#tern/contracts';
import { ChunkQueue, type InvokeHandlerResult, InvokeError, Messaging, serveInvoke } from '#tern/messaging';
import { buildImage, parseRegistryRef, pinnedRef } from '#tern/runtime';
import { fireAndForget } from '#tern/timing';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { InvokeRoutes } from '../invoke/invoke-routes.js';
import { bodyOf } from '../invoke/json-body.js';

/** A build's answer is its log: room for a long apt install's output. */
const MAX_BUILD_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * Builds images on this machine when it offers building (AGENT_BUILDER=true): serves
 * `tern.agent.<machine id>.image.build.*.v1`, runs the build (a runc container per step, one
 * layer each, cached under `<state dir>/builds/layout` by hash(parent, step)) and streams its
 * steps and log lines back as NDJSON while it runs. The layout's lock runs builds one at a
 * time, so two identical builds sent here at once build once.
 */
@Injectable()
export class ImageBuilds implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('builds');
  private sub?: Subscription;

  constructor(
    @Inject(Messaging) private readonly messaging: Messaging,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
    private readonly invokes: InvokeRoutes,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.ctx.settings.builder) return;
    this.sub = serveInvoke(
      this.messaging,
      { machineId: this.ctx.registration.machineId },
      (head, body) => this.answer(head, body),
      this.invokes.fetchBody,
      AGENT_IMAGE_BUILD,
      MAX_BUILD_ANSWER_BYTES,
    );
    this.logger.log('this machine builds images (AGENT_BUILDER=true)');
  }

  onApplicationShutdown(): void {
    this.sub?.unsubscribe();
  }

  private async answer(head: InvokeHead, body: Uint8Array): Promise<InvokeHandlerResult> {
    if (head.method !== 'POST' || head.path !== '/build')
      throw new InvokeError(404, `${head.method} ${head.path}: a builder answers POST /build`);
    const cmd = await bodyOf(ImageBuildCommand, body);
    const events = new ChunkQueue(() => undefined);
    const send = (e: ImageBuildEvent) => events.push(Buffer.from(`${JSON.stringify(e)}\n`));
    fireAndForget(
      `build ${cmd.target}`,
      this.logger,
      this.run(cmd, head.requestId, send).finally(() => events.end()),
    );
    return { status: 200, headers: { 'content-type': 'application/x-ndjson' }, body: events };
  }

  /** Runs one build to its end, which it always reports (`built` or `failed`): a build never throws past here. */
  private async run(cmd: ImageBuildCommand, buildId: string, send: (e: ImageBuildEvent) => void): Promise<void> {
    const root = join(this.ctx.settings.stateDir, 'builds');
    const t0 = Date.now();
    let step = 'base';
    let context: string | undefined;
    this.logger.log({ target: cmd.target }, `building ${cmd.target}`);
    try {
      if (cmd.context) context = await unpackContext(join(root, `context-${buildId}-${randomBytes(4).toString('hex')}`), cmd.context);
      const result = await buildImage(cmd.build, {
        base: cmd.base,
        target: cmd.target,
        access: [cmd.push],
        layout: join(root, 'layout'),
        workDir: join(root, 'scratch'),
        ...(context ? { context } : {}),
        onLog: (line) => send({ type: 'log', line }),
        onStep: (p) => {
          step = p.name;
          send({ type: 'step', ...p });
        },
      });
      const ref = pinnedRef(parseRegistryRef(cmd.target), result.digest);
      const cachedSteps = result.steps.filter((s) => s.cached).length;
      send({ type: 'built', ref, digest: result.digest, cachedSteps, steps: result.steps.length, seconds: (Date.now() - t0) / 1000 });
      this.logger.log({ target: cmd.target, digest: result.digest }, `built ${ref}`);
    } catch (e) {
      const message = (e as Error).message;
      send({ type: 'failed', step, message });
      this.logger.warn({ target: cmd.target, step }, `build of ${cmd.target} failed at ${step}: ${message.split('\n')[0]}`);
    } finally {
      if (context) await rm(context, { recursive: true, force: true });
    }
  }
}

/** The spec's folder (tar.gz, base64) extracted where the build binds it read-only at /tern/context. */
async function unpackContext(dir: string, base64: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const archive = `${dir}.tar.gz`;
  try {
    await writeFile(archive, Buffer.from(base64, 'base64'));
    const r = await execa('tar', ['-xzf', archive, '-C', dir, '--no-same-owner'], { reject: false, all: true });
    if (r.exitCode !== 0) throw new Error(`the build context is not a tar.gz that extracts cleanly: ${(r.all ?? '').trim().slice(0, 500)}`);
    return dir;
  } finally {
    await rm(archive, { force: true });
  }
}
