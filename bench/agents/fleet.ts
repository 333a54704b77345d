/**
 * bench/agents' simulated fleet, spread over worker processes (fleet-worker.ts): one process
 * cannot hold 20,000 connections with their reads and publishes on one event loop, and the
 * agents of a real fleet do not share one either. Agent i lives in worker i mod workers.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { type AccountSigner } from '#tern/nats-auth';
import { ROOT } from '../invoke/stack.js';

export interface FleetSettings {
  /** The NATS servers: agent i connects to urls[i mod their count]. */
  urls: string[];
  /** The namespace, also the bench's tag in message ids. */
  tag: string;
  beatMs: number;
  containerEveryMs: number;
  deploymentId: string;
  workspaceId: string;
}

export type FleetCommand = { seq: number } & (
  | { op: 'init'; settings: FleetSettings; signer: AccountSigner }
  | { op: 'join'; ids: string[]; homes: number[]; spreadMs: number }
  | { op: 'drop'; ids: string[] }
  | { op: 'sample'; ids: string[] }
  | { op: 'stop' }
);

export type FleetReport =
  | { op: 'done'; seq: number }
  /** Each second: messages published and failed, agents connected, and the sampled agents' beats [id, sequence, sentAt]. */
  | { op: 'report'; sent: number; errors: number; retries: number; connected: number; beats: [string, number, number][] };

type Command = FleetCommand extends infer C ? (C extends FleetCommand ? Omit<C, 'seq'> : never) : never;

export const agentId = (i: number) => `bm${String(i).padStart(6, '0')}`;

export class Fleet {
  private readonly workers: ChildProcess[] = [];
  private readonly waiting = new Map<number, () => void>();
  private readonly connected: number[] = [];
  private seq = 0;
  private servers = 1;
  sent = 0;
  errors = 0;
  /** Connects the server refused and the agent tried again. */
  retries = 0;

  constructor(
    count: number,
    /** Called with each sampled beat the workers report. */
    private readonly onBeat: (id: string, sequence: number, sentAt: number) => void,
  ) {
    for (let w = 0; w < count; w++) {
      const child = fork(join(ROOT, 'dist/bench/agents/fleet-worker.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child.on('message', (m: FleetReport) => {
        if (m.op === 'done') {
          this.waiting.get(m.seq)?.();
          this.waiting.delete(m.seq);
          return;
        }
        this.sent += m.sent;
        this.errors += m.errors;
        this.retries += m.retries;
        this.connected[w] = m.connected;
        for (const [id, sequence, sentAt] of m.beats) this.onBeat(id, sequence, sentAt);
      });
      this.workers.push(child);
    }
  }

  get pids(): number[] {
    return this.workers.map((w) => w.pid!);
  }

  /** Agents holding a connection, as of the workers' last reports. */
  get connectedCount(): number {
    return this.connected.reduce((a, b) => a + (b ?? 0), 0);
  }

  init(settings: FleetSettings, signer: AccountSigner) {
    this.servers = settings.urls.length;
    return this.all({ op: 'init', settings, signer });
  }

  /** Agents first..last-1 connect, spread over spreadMs (0: all at once), each with its own user. */
  join(first: number, last: number, spreadMs: number) {
    return this.each(first, last, (ids, homes) => ({ op: 'join', ids, homes, spreadMs }));
  }

  drop(first: number, last: number) {
    return this.each(first, last, (ids) => ({ op: 'drop', ids }));
  }

  sample(ids: string[]) {
    return this.all({ op: 'sample', ids });
  }

  async stop() {
    await Promise.race([this.all({ op: 'stop' }), new Promise((r) => setTimeout(r, 10_000))]);
    for (const w of this.workers) if (w.exitCode === null) w.kill('SIGKILL');
  }

  /** Agents first..last-1 by worker, with each one's NATS server (agent i: server i mod servers). */
  private each(first: number, last: number, command: (ids: string[], homes: number[]) => Command) {
    const ids: string[][] = this.workers.map(() => []);
    const homes: number[][] = this.workers.map(() => []);
    for (let i = first; i < last; i++) {
      ids[i % this.workers.length]!.push(agentId(i));
      homes[i % this.workers.length]!.push(i % this.servers);
    }
    return Promise.all(this.workers.map((w, n) => this.ask(w, command(ids[n]!, homes[n]!))));
  }

  private all(command: Command) {
    return Promise.all(this.workers.map((w) => this.ask(w, command)));
  }

  private ask(worker: ChildProcess, command: Command): Promise<void> {
    const seq = ++this.seq;
    return new Promise<void>((resolve) => {
      this.waiting.set(seq, resolve);
      worker.send({ ...command, seq });
    });
  }
}
