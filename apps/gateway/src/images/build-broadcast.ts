import type { ImageBuildEvent } from '#tern/contracts';
import { ChunkQueue } from '#tern/messaging';

/**
 * One build in flight on this gateway, as NDJSON lines: every caller that asks for the same
 * spec while it runs follows it (the lines so far, then the rest as they come) instead of
 * starting another build.
 */
export class BuildBroadcast {
  private readonly lines: Buffer[] = [];
  private readonly followers = new Set<ChunkQueue>();
  private ended = false;

  publish(event: ImageBuildEvent): void {
    const line = Buffer.from(`${JSON.stringify(event)}\n`);
    this.lines.push(line);
    for (const f of this.followers) f.push(line);
  }

  end(): void {
    this.ended = true;
    for (const f of this.followers) f.end();
    this.followers.clear();
  }

  follow(): AsyncIterable<Uint8Array> {
    const queue: ChunkQueue = new ChunkQueue(() => this.followers.delete(queue));
    for (const line of this.lines) queue.push(line);
    if (this.ended) queue.end();
    else this.followers.add(queue);
    return queue;
  }
}
