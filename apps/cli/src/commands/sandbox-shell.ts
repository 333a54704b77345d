import WebSocket from 'ws';
import { ApiError } from '../api-client.js';
import type { CliContext } from '../cli-config.js';

/** Sent when this side's stdin ends (a pipe), so the shell reads EOF and ends with it. */
const END_OF_INPUT = JSON.stringify({ eof: true });

/** This terminal's size as the shell's text message: sent at the start and whenever the terminal is resized. */
function resizeMessage(): string {
  return JSON.stringify({ resize: { cols: process.stdout.columns, rows: process.stdout.rows } });
}

/** The shell's WebSocket URL, sized as this terminal when there is one. */
function shellUrl(ctx: CliContext, id: string): URL {
  const url = new URL(`${ctx.gateway}/api/v1/sandboxes/${encodeURIComponent(id)}/shell`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  if (process.stdout.isTTY) {
    url.searchParams.set('cols', String(process.stdout.columns));
    url.searchParams.set('rows', String(process.stdout.rows));
  }
  return url;
}

/**
 * `tern sandbox shell <id>`: a shell on a pty inside the sandbox over a WebSocket to the gateway
 * (which carries it over NATS to the sandbox's agent). This terminal goes raw, so keys, Ctrl-C
 * and full-screen programs act inside, and its size follows this terminal's (SIGWINCH); it ends
 * when the shell exits.
 */
export function sandboxShell(ctx: CliContext, id: string): Promise<void> {
  const ws = new WebSocket(shellUrl(ctx, id), { headers: ctx.token ? { authorization: `Bearer ${ctx.token}` } : {} });
  const stdin = process.stdin;
  const raw = stdin.isTTY;
  const sized = process.stdout.isTTY;
  const onResize = () => ws.send(resizeMessage());
  return new Promise((resolve, reject) => {
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString('utf8')));
      res.on('end', () => {
        let message: unknown = text;
        try {
          message = (JSON.parse(text) as { message?: unknown }).message ?? text;
        } catch {
          // not JSON: the text as it is
        }
        reject(new ApiError(res.statusCode ?? 0, `${res.statusCode} ${String(message)}`));
      });
    });
    ws.on('error', (e) => reject(new ApiError(0, `shell connection to ${ctx.gateway} failed: ${e.message}`)));
    ws.on('open', () => {
      if (raw) stdin.setRawMode(true);
      if (sized) {
        onResize();
        process.on('SIGWINCH', onResize);
      }
      stdin.on('data', (data: Buffer) => ws.send(data));
      stdin.on('end', () => ws.send(END_OF_INPUT));
      stdin.resume();
    });
    ws.on('message', (data: Buffer) => process.stdout.write(data));
    ws.on('close', () => {
      if (raw) stdin.setRawMode(false);
      process.off('SIGWINCH', onResize);
      stdin.pause();
      resolve();
    });
  });
}
