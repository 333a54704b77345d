import type { Readable } from 'node:stream';

export interface DiscardBounds {
  /** Bytes still read after the refusal; past them the sender is not worth waiting for. */
  maxBytes: number;
  maxMs: number;
}

/**
 * Reads what is left of a refused upload and throws it away, so that a client still sending
 * sees the answer instead of a broken pipe: closing the connection under an unread body makes
 * the kernel reset it, and the client's next write fails with EPIPE before it reads the
 * response. Bounded, so a refused upload cannot hold the gateway: resolves true once the body
 * has ended, false when it passed the bounds or failed (the caller then closes the connection).
 */
export function discardBody(body: Readable, bounds: DiscardBounds): Promise<boolean> {
  if (body.readableEnded) return Promise.resolve(true);
  if (body.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    let left = bounds.maxBytes;
    const finish = (ended: boolean) => {
      clearTimeout(timer);
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      if (!ended) body.pause();
      resolve(ended);
    };
    const onData = (chunk: Buffer) => {
      left -= chunk.length;
      if (left < 0) finish(false);
    };
    const onEnd = () => finish(true);
    const onError = () => finish(false);
    const timer = setTimeout(() => finish(false), bounds.maxMs);
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onError);
    body.resume();
  });
}
