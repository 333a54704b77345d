import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server, Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { InternetHost } from './internet-host.js';

/**
 * A Python module that tries a TCP connection to each `host:port` given, all at once with a
 * 2 s timeout each, and answers one object: target → `open`, or why not (`timed out`,
 * `Connection refused`, `Network is unreachable`, …). As a handler (`probe.py:predict`) it
 * takes `{"targets": [...]}`; as a program, a JSON list as its first argument, and prints the
 * answer.
 */
export const PROBE_MODULE = `
import json, socket, sys, threading

def probe_all(targets):
    out = {}
    def probe(t):
        host, port = t.rsplit(':', 1)
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect((host, int(port)))
            out[t] = 'open'
        except OSError as e:
            out[t] = e.strerror or str(e) or type(e).__name__
        finally:
            s.close()
    threads = [threading.Thread(target=probe, args=(t,)) for t in targets]
    for th in threads: th.start()
    for th in threads: th.join()
    return out

def predict(inputs):
    return probe_all(inputs["targets"])

if __name__ == "__main__":
    print(json.dumps(probe_all(json.loads(sys.argv[1]))), flush=True)
`;

/** Whether a TCP connection from this (the host's) namespace gets through: the control for each probe. */
export function reachable(host: string, port: number): Promise<boolean> {
  const socket = new Socket();
  socket.setTimeout(2000);
  return new Promise<boolean>((resolve) => {
    socket.once('connect', () => resolve(true));
    socket.once('timeout', () => resolve(false));
    socket.once('error', () => resolve(false));
    socket.connect(port, host);
  }).finally(() => socket.destroy());
}

/**
 * What a container's probes aim at, every address held on this machine so that nothing leaves
 * it even if a rule were wrong: two "internet" hosts in different /30s of 203.0.113.0/24, the
 * metadata address 169.254.169.254, a private address (`privatePrefix` + a random /30), each in
 * its own network namespace; and a service of the host's listening on every address, as a
 * careless one would.
 */
export class ProbeTargets {
  private constructor(
    readonly internet: InternetHost,
    readonly otherInternet: InternetHost,
    readonly metadata: InternetHost,
    readonly privateHost: InternetHost,
    private readonly hostService: Server,
  ) {}

  /** The host's own non-loopback IPv4 address, if it has one. */
  static readonly hostAddress = Object.values(networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

  static async start(privatePrefix: string): Promise<ProbeTargets> {
    const hosts: InternetHost[] = [];
    try {
      // Two free /30s of 203.0.113.0/24 (each host holds its own), then the given addresses.
      for (const address of [undefined, undefined, '169.254.169.254', `${privatePrefix}.${4 * randomInt(0, 64) + 2}`])
        hosts.push(await InternetHost.start([{ status: 200 }], address));
      const hostService = createServer((s) => s.end());
      hostService.listen(0, '0.0.0.0');
      await once(hostService, 'listening');
      return new ProbeTargets(hosts[0], hosts[1], hosts[2], hosts[3], hostService);
    } catch (e) {
      for (const h of hosts) await h.stop();
      throw e;
    }
  }

  get hostPort(): number {
    return (this.hostService.address() as { port: number }).port;
  }

  /** `address:port` of a test host. */
  static target(h: InternetHost): string {
    return `${h.address}:${h.port}`;
  }

  /** The /30 the internet host stands in (it is the /30's second address). */
  get internetCidr(): string {
    return `${this.internet.address.replace(/\d+$/, (d) => String(Number(d) - 2))}/30`;
  }

  async stop(): Promise<void> {
    for (const h of [this.internet, this.otherInternet, this.metadata, this.privateHost]) await h.stop();
    this.hostService.close();
  }
}
