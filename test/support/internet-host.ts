import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { addLinkedNamespace, removeLinkedNamespace } from './netns.js';

/** One HTTP request the host received. */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * A host "on the internet" for tests: its own network namespace on this machine, joined to the
 * root namespace by a veth pair in a /30 of TEST-NET-3 (203.0.113.0/24, a documentation range no
 * real host uses), with an HTTP server in it. Nothing sent to it leaves the machine. The server
 * answers each request from `answers` in turn (the last one repeats): a status, and a Location
 * for redirects. Needs root and `ip` (iproute2).
 */
export class InternetHost {
  readonly requests: ReceivedRequest[] = [];
  private server?: ChildProcess;
  private lock?: string;

  private constructor(
    readonly namespace: string,
    private readonly hostVeth: string,
    readonly address: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `http://${this.address}:${this.port}`;
  }

  /**
   * `address`: where the host stands instead of a free 203.0.113.x, for tests that need a
   * host at a given address (169.254.169.254, a private one): it must be the second address of
   * a /30 (last octet 4n+2); the root namespace takes the first. Every address is held by a lock
   * while its host stands, so two hosts (of one test or of tests running at once) never share a
   * /30: the root namespace would route both hosts' traffic to the first one.
   */
  static async start(answers: { status: number; location?: string }[] = [{ status: 200 }], address?: string): Promise<InternetHost> {
    const id = randomBytes(3).toString('hex');
    const namespace = `tern-inet-${id}`;
    const hostVeth = `ti${id}h`;
    if (address !== undefined) {
      const last = Number(address.split('.')[3]);
      if (!isIPv4(address) || last % 4 !== 2) throw new Error(`a test host's address must end in 4n+2 (got ${address})`);
    }
    // A given address waits for its holder; otherwise the first free /30 of 203.0.113.0/24, tried in random order.
    const [far, lock] = address ? [address, await lockAddress(address, namespace, hostVeth)] : await lockFreeAddress(namespace, hostVeth);
    const octets = far.split('.').map(Number);
    const near = [...octets.slice(0, 3), octets[3] - 1].join('.');
    const host = new InternetHost(namespace, hostVeth, far, 8080);
    host.lock = lock;
    try {
      await addLinkedNamespace({ namespace, hostVeth, peerVeth: `ti${id}n`, near, far, defaultRoute: true });
      await host.serve(answers);
      return host;
    } catch (error) {
      await host.stop();
      throw error;
    }
  }

  private async serve(answers: { status: number; location?: string }[]): Promise<void> {
    const program = `
      const answers = ${JSON.stringify(answers)};
      let n = 0;
      require('node:http').createServer((req, res) => {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          console.log(JSON.stringify({ method: req.method, path: req.url, headers: req.headers, body }));
          const a = answers[Math.min(n++, answers.length - 1)];
          res.writeHead(a.status, a.location ? { location: a.location } : {});
          res.end();
        });
      }).listen(${this.port}, '${this.address}', () => console.log('listening'));`;
    const server = spawn('ip', ['netns', 'exec', this.namespace, process.execPath, '-e', program], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('exit', (code) => reject(new Error(`the internet host's server exited (${code})`)));
      createInterface({ input: server.stdout! }).on('line', (line) => {
        if (line === 'listening') return resolve();
        this.requests.push(JSON.parse(line) as ReceivedRequest);
      });
    });
  }

  /**
   * The first n requests, once their lines have come through the server's stdout (which can
   * trail the HTTP answer the caller already has).
   */
  async received(n: number, timeoutMs = 10_000): Promise<ReceivedRequest[]> {
    for (const deadline = Date.now() + timeoutMs; this.requests.length < n;) {
      if (Date.now() > deadline) throw new Error(`the internet host received ${this.requests.length} of ${n} requests`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return this.requests.slice(0, n);
  }

  async stop(): Promise<void> {
    if (this.server && this.server.exitCode === null) {
      const exited = new Promise((r) => this.server!.once('exit', r));
      this.server.kill();
      await exited;
    }
    await removeLinkedNamespace(this.namespace, this.hostVeth);
    if (this.lock) await rm(this.lock, { force: true });
  }
}

/** The lock on a free 203.0.113.(4n+2), tried in random order, and that address. */
function lockFreeAddress(namespace: string, hostVeth: string): Promise<[string, string]> {
  return lockOneOf(
    () => {
      const slots = Array.from({ length: 64 }, (_, n) => `203.0.113.${4 * n + 2}`);
      for (let i = slots.length - 1; i > 0; i--) {
        const j = randomInt(0, i + 1);
        [slots[i], slots[j]] = [slots[j], slots[i]];
      }
      return slots;
    },
    namespace,
    hostVeth,
  );
}

/** The lock on `address`. */
async function lockAddress(address: string, namespace: string, hostVeth: string): Promise<string> {
  return (await lockOneOf(() => [address], namespace, hostVeth))[1];
}

/**
 * The first of `candidates()` whose lock could be taken, and that lock; while every one is
 * held, tries them again (candidates asked anew) every 200 ms, up to timeoutMs.
 */
async function lockOneOf(candidates: () => string[], namespace: string, hostVeth: string, timeoutMs = 120_000): Promise<[string, string]> {
  for (const deadline = Date.now() + timeoutMs; ;) {
    const holders: string[] = [];
    for (const address of candidates()) {
      const held = await tryLockAddress(address, namespace, hostVeth);
      if (held.lock) return [address, held.lock];
      holders.push(`${address} by process ${held.holder}`);
    }
    if (Date.now() > deadline) throw new Error(`the test host addresses stayed in use: ${holders.join(', ')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * `/run/tern-test-host-<address>.lock`, created exclusively, naming its holder's pid and the
 * namespace and veth it makes; taken over from a process that is gone, after removing what that
 * process left at the address (a killed test run's namespace would otherwise keep its route).
 * Without the lock: the pid of the live process holding it.
 */
async function tryLockAddress(address: string, namespace: string, hostVeth: string): Promise<{ lock?: string; holder?: number }> {
  const path = `/run/tern-test-host-${address}.lock`;
  for (;;) {
    try {
      await writeFile(path, `${process.pid} ${namespace} ${hostVeth}`, { flag: 'wx' });
      return { lock: path };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const [pid, leftNamespace, leftVeth] = (await readFile(path, 'utf8').catch(() => '0')).split(' ');
    const holder = Number(pid);
    if (!holder || existsSync(`/proc/${holder}`)) return { holder };
    if (leftNamespace && leftVeth) await removeLinkedNamespace(leftNamespace, leftVeth);
    await rm(path, { force: true });
  }
}
