import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Logger } from '@nestjs/common';
import type { TunnelOpen, TunnelOpenReply } from '#tern/contracts';
import { type Messaging, TunnelEnd } from '#tern/messaging';
import { fireAndForget } from '#tern/timing';
import type { HostedSandbox } from './hosted-sandbox.js';
import { SHELL_ID_ENV } from './shell-resize.js';

/** How long the sandbox's port may take to accept the connection. */
const CONNECT_TIMEOUT_MS = 5_000;
/** A shell lives at most this long (the sandbox's own lifetime ends it sooner). */
const SHELL_MAX_MS = 24 * 3600_000;

const logger = new Logger('sandbox-tunnels');

/**
 * The shell of `tern sandbox shell`: `script` gives it a pty inside the sandbox (so it prompts,
 * echoes and runs full-screen programs), sized as the caller's terminal; bash where there is one.
 */
export function shellArgs(cols = 80, rows = 24): string[] {
  const shell = `stty cols ${cols} rows ${rows} 2>/dev/null; if command -v bash >/dev/null; then exec bash -i; else exec sh -i; fi`;
  return ['script', '-qfec', shell, '/dev/null'];
}

export function connectToPort(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: CONNECT_TIMEOUT_MS });
    socket.once('connect', () => {
      socket.setTimeout(0);
      resolve(socket);
    });
    socket.once('timeout', () => socket.destroy(new Error(`port ${port} did not accept within ${CONNECT_TIMEOUT_MS} ms`)));
    socket.once('error', reject);
  });
}

/**
 * Opens a tunnel into a sandbox (SANDBOX_TUNNEL_OPEN): a connection to one of its ports on its
 * own address, or a shell on a pty (listed among its processes, killed when the tunnel closes).
 */
export async function openSandboxTunnel(
  messaging: Messaging,
  machineId: string,
  sandbox: HostedSandbox,
  cmd: TunnelOpen,
): Promise<TunnelOpenReply> {
  const end = new TunnelEnd(messaging, 'agent', machineId, cmd.tunnelId);
  let socket: Duplex;
  if (cmd.target === 'port') {
    if (!sandbox.address) {
      end.close();
      return { opened: false, reason: "this machine runs containers on the host's network: sandbox ports are not offered there" };
    }
    try {
      socket = await connectToPort(sandbox.address, cmd.port ?? 0);
    } catch (e) {
      end.close();
      return { opened: false, reason: `nothing answers on port ${cmd.port} in sandbox ${sandbox.id}: ${(e as Error).message}` };
    }
  } else {
    const shell = await sandbox.exec(
      shellArgs(cmd.cols, cmd.rows),
      { keep_stdin_open: true, env: { TERM: 'xterm-256color', [SHELL_ID_ENV]: cmd.tunnelId } },
      SHELL_MAX_MS,
    );
    socket = shell.terminal();
    fireAndForget(`ending the shell ${shell.pid} of sandbox ${sandbox.id}`, logger, async () => {
      await end.done;
      await shell.kill('SIGKILL', 'shell closed');
    });
  }
  fireAndForget(`tunnel ${cmd.tunnelId} of sandbox ${sandbox.id}`, logger, end.attach(socket));
  return { opened: true };
}
