import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Linux's default for outgoing connections' local ports, where /proc does not say. */
const DEFAULT_EPHEMERAL: readonly [number, number] = [32768, 60999];
/** The lowest port handed out: below it sit well-known services and their registered ports. */
const LOWEST = 10000;
/** How long a port handed out is not handed out again by this process: its taker binds it later. */
const HANDED_OUT_MS = 5 * 60_000;

const handedOut = new Map<number, number>();

/** The kernel's range for the local ports of outgoing connections. */
export function ephemeralPorts(text = readText('/proc/sys/net/ipv4/ip_local_port_range')): readonly [number, number] {
  const [low, high] = (text ?? '').trim().split(/\s+/).map(Number);
  return low! > 0 && high! >= low! ? [low!, high!] : DEFAULT_EPHEMERAL;
}

/**
 * Where freePort draws from: below the ephemeral range when that leaves room, else above it.
 * A port the kernel picks (listen on 0) comes from the ephemeral range, where any outgoing
 * connection on the machine may take it between the pick and the bind: a service started on it
 * seconds later failed with EADDRINUSE.
 */
export function portRange([low, high]: readonly [number, number]): readonly [number, number] {
  if (low - LOWEST >= 2000) return [LOWEST, low - 1];
  if (65535 - high >= 2000) return [high + 1, 65535];
  return [LOWEST, 65535];
}

/**
 * A free TCP port for something that binds it soon (a host-networked container's $PORT, a
 * test's service): drawn at random outside the ephemeral range, free on every IPv4 address now,
 * not in `avoid`, and not handed out by this process in the last five minutes.
 */
export async function freePort(avoid: ReadonlySet<number> = new Set()): Promise<number> {
  const [low, high] = portRange(ephemeralPorts());
  const now = Date.now();
  for (const [port, at] of handedOut) if (now - at > HANDED_OUT_MS) handedOut.delete(port);
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (avoid.has(port) || handedOut.has(port) || !(await bindable(port))) continue;
    handedOut.set(port, now);
    return port;
  }
  throw new Error(`no free port found in ${low}-${high}`);
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '0.0.0.0', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
