/**
 * A share of bench/agents' simulated fleet, in a process of its own (forked by fleet.ts): one
 * NATS connection and one machine user per agent, each agent beating every period at its own
 * phase (from when it connected, as the agent's ticker does) and changing a container at its own
 * phase. Driven over IPC (FleetCommand); reports what it sent once a second (FleetReport).
 */
import { randomUUID } from 'node:crypto';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { encode } from '@nats-io/nkeys';
import { type Authenticator, connect, type NatsConnection } from '@nats-io/transport-node';
import { CONTAINER_STARTED, CONTAINER_STOPPED, MACHINE_BEAT, type MachineHeartbeat, subjectFor } from '#tern/contracts';
import { Namespace } from '#tern/messaging';
import { type AccountSigner, issueMachineJwt, nativeKeyPair, newUserKey } from '#tern/nats-auth';
import type { FleetCommand, FleetReport, FleetSettings } from './fleet.js';

const TICK_MS = 20;
/** Connections opened at once while joining: a burst of connects is a burst of auth callouts and TLS-less handshakes. */
const CONNECTING_AT_ONCE = 20;

interface Agent {
  id: string;
  /** Its user: the JWT and the nonce signature, as credsAuthenticator gives them but signed with Node's Ed25519. */
  auth: Authenticator;
  /** Its server's index in the settings' urls (agents spread over a cluster in turn). */
  home: number;
  nc?: NatsConnection;
  js?: JetStreamClient;
  sequence: number;
  /** The container it runs now (container events alternate started / stopped). */
  running?: string;
}

let settings: FleetSettings;
let ns: Namespace;
let signer: AccountSigner;
const agents = new Map<string, Agent>();
/** Agents by the slot of the period they beat in, and by the slot of the container period they change a container in. */
const beatSlots: Set<Agent>[] = [];
const changeSlots: Set<Agent>[] = [];
const sampled = new Set<string>();
let sent = 0;
let errors = 0;
/** Connects tried again. */
let retries = 0;
let beats: [string, number, number][] = [];
let lastTick = Date.now();
/** Each kind of failure is logged once. */
const failures = new Set<string>();

const send = (m: FleetReport) => process.send!(m);

function beatPayload(agent: Agent, sentAt: number): MachineHeartbeat {
  return {
    machineId: agent.id,
    pool: 'default',
    sentAt: new Date(sentAt).toISOString(),
    sequence: ++agent.sequence,
    cpuPercent: 12.5,
    memoryPercent: 40,
    gpus: Array.from({ length: 8 }, (_, index) => ({ index, model: 'H100', memoryMiB: 81559, state: 'free' as const })),
    runningContainers: agent.running ? [agent.running] : [],
    agentVersion: 'bench',
    isolation: { runtime: 'runc', network: 'private', userNamespaces: true },
  };
}

function publish(agent: Agent, subject: string, payload: unknown, msgID: string) {
  if (!agent.js) return;
  sent++;
  agent.js.publish(subject, JSON.stringify(payload), { msgID }).catch(() => errors++);
}

/** A beat as the agent sends it: a core NATS publish on its own machine's subject, no acknowledgement. */
function beat(agent: Agent, now: number) {
  if (!agent.nc) return;
  const hb = beatPayload(agent, now);
  if (sampled.has(agent.id)) beats.push([agent.id, hb.sequence, now]);
  sent++;
  try {
    agent.nc.publish(ns.subject(subjectFor(MACHINE_BEAT, agent.id)), JSON.stringify(hb));
  } catch {
    errors++;
  }
}

function containerEvent(agent: Agent, now: number) {
  const at = new Date(now).toISOString();
  const base = { deploymentId: settings.deploymentId, deploymentVersion: 1, workspaceId: settings.workspaceId, machineId: agent.id, at };
  if (agent.running) {
    const stopped = { ...base, containerId: agent.running, exitCode: 0, oomKilled: false, reason: 'stop command: scale-down' };
    publish(agent, ns.subject(subjectFor(CONTAINER_STOPPED, agent.id)), stopped, `${agent.running}-stopped`);
    agent.running = undefined;
    return;
  }
  agent.running = randomUUID();
  const resources = { cpuMillicores: 2000, memoryBytes: 8 * 2 ** 30, gpuCount: 1, gpuType: 'H100' };
  const started = { ...base, containerId: agent.running, resources, startupLatencyMs: 900 };
  publish(agent, ns.subject(subjectFor(CONTAINER_STARTED, agent.id)), started, `${agent.running}-started`);
}

const slotOf = (now: number, periodMs: number) => Math.floor((now % periodMs) / TICK_MS);

/** Connects an agent with its own user (issued once, kept for rejoins) and starts its beats at once, as an agent does on start. */
async function connectAgent(agent: Agent): Promise<void> {
  // As an agent does, a connect the server refused (its auth timeout, while this process was busy) is tried again.
  for (let attempt = 1; ; attempt++) {
    try {
      agent.nc = await connect({
        // Its own server first, the others if that one is gone, as an agent given a cluster's URLs.
        servers: [...settings.urls.slice(agent.home), ...settings.urls.slice(0, agent.home)],
        noRandomize: true,
        authenticator: agent.auth,
        inboxPrefix: `_INBOX.${settings.tag}.machine.${agent.id}`,
        name: agent.id,
        maxReconnectAttempts: -1,
      });
      break;
    } catch (e) {
      if (attempt === 10) throw e;
      retries++;
      await new Promise((r) => setTimeout(r, 500 * attempt));
    }
  }
  agent.js = jetstream(agent.nc, { timeout: 30_000 });
  const now = Date.now();
  beat(agent, now);
  beatSlots[slotOf(now, settings.beatMs)]!.add(agent);
  changeSlots[Math.floor(Math.random() * changeSlots.length)]!.add(agent);
}

async function join(ids: string[], homes: number[], spreadMs: number) {
  const start = Date.now();
  const queue = ids.map((id, i) => ({ id, home: homes[i]!, at: start + (spreadMs * i) / ids.length }));
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      let agent = agents.get(next.id);
      if (!agent) {
        const key = newUserKey();
        const jwt = await issueMachineJwt(signer, {
          namespace: settings.tag,
          machineId: next.id,
          publicKey: key.publicKey,
          expiresInSeconds: 86_400,
        });
        const kp = nativeKeyPair(key.seed);
        const auth: Authenticator = (nonce) => ({
          jwt,
          nkey: key.publicKey,
          sig: nonce ? encode(kp.sign(new TextEncoder().encode(nonce))) : '',
        });
        agent = { id: next.id, home: next.home, auth, sequence: 0 };
        agents.set(next.id, agent);
      }
      const wait = next.at - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await connectAgent(agent).catch((e: Error) => {
        errors++;
        if (!failures.has(e.message)) console.error(`[fleet ${process.pid}] ${next.id} did not connect: ${e.message}`);
        failures.add(e.message);
      });
    }
  };
  await Promise.all(Array.from({ length: CONNECTING_AT_ONCE }, worker));
}

/** The machines go silent at once (a site's uplink lost): their connections close, their beats stop. */
async function drop(ids: string[]) {
  await Promise.all(
    ids.map(async (id) => {
      const agent = agents.get(id);
      if (!agent?.nc) return;
      for (const slot of [...beatSlots, ...changeSlots]) slot.delete(agent);
      const nc = agent.nc;
      agent.nc = agent.js = undefined;
      await nc.close().catch(() => undefined);
    }),
  );
}

function tick() {
  const now = Date.now();
  for (let t = lastTick + TICK_MS; t <= now; t += TICK_MS) {
    for (const agent of beatSlots[slotOf(t, settings.beatMs)]!) beat(agent, now);
    for (const agent of changeSlots[slotOf(t, settings.containerEveryMs)]!) containerEvent(agent, now);
    lastTick = t;
  }
}

function report() {
  let connected = 0;
  for (const a of agents.values()) if (a.nc) connected++;
  send({ op: 'report', sent, errors, retries, connected, beats });
  sent = errors = retries = 0;
  beats = [];
}

// The bench gone (Ctrl-C, a crash): so are its agents.
process.on('disconnect', () => process.exit(0));

process.on('message', (m: FleetCommand) => {
  handle(m)
    .catch((e: Error) => console.error(`[fleet ${process.pid}] ${m.op} failed: ${e.stack}`))
    .finally(() => send({ op: 'done', seq: m.seq }));
});

async function handle(m: FleetCommand) {
  if (m.op === 'init') {
    settings = m.settings;
    signer = m.signer;
    ns = new Namespace(settings.tag);
    for (let i = 0; i < settings.beatMs / TICK_MS; i++) beatSlots.push(new Set());
    for (let i = 0; i < settings.containerEveryMs / TICK_MS; i++) changeSlots.push(new Set());
    lastTick = Date.now();
    setInterval(tick, TICK_MS);
    setInterval(report, 1000);
  } else if (m.op === 'join') await join(m.ids, m.homes, m.spreadMs);
  else if (m.op === 'drop') await drop(m.ids);
  else if (m.op === 'sample') {
    sampled.clear();
    for (const id of m.ids) sampled.add(id);
  } else if (m.op === 'stop') {
    await drop([...agents.keys()]);
    process.exit(0);
  }
}
