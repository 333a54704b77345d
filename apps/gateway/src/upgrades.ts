import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { HttpException, type Logger } from '@nestjs/common';
import { fireAndForget } from '#tern/timing';

/** Writes an HTTP error on a socket that asked for an upgrade, then closes it. */
export function refuseUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ statusCode: status, message });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * An upgrade request as the server behind Tern receives it: its own path, and the caller's
 * headers as `header` keeps them (undefined drops one; it may throw to refuse the request).
 */
export function upgradeHead(req: IncomingMessage, path: string, header: (name: string, value: string) => string | undefined): string {
  const lines = [`${req.method} ${path.startsWith('/') ? path : `/${path}`} HTTP/1.1`];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const value = header(req.rawHeaders[i], req.rawHeaders[i + 1]);
    if (value !== undefined) lines.push(`${req.rawHeaders[i]}: ${value}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/**
 * Serves an upgrade request off the HTTP server's `upgrade` event: an HttpException becomes the
 * answer it names, anything else a 500 saying `failure` (and a log line under `label`).
 */
export function serveUpgrade(logger: Logger, label: string, socket: Duplex, serve: () => Promise<void>, failure: string): void {
  socket.on('error', () => socket.destroy());
  fireAndForget(
    label,
    logger,
    serve().catch((e: unknown) => {
      if (e instanceof HttpException) return refuseUpgrade(socket, e.getStatus(), e.message);
      refuseUpgrade(socket, 500, failure);
      throw e;
    }),
  );
}
