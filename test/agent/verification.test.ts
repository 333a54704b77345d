import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  AGENT_PROOF_CHALLENGE,
  AGENT_PROOF_PREPARE,
  AGENT_PROOF_PROBE,
  type MachineDetail,
  MACHINE_BEAT,
  type HardwareChallenge,
  type HardwareProbe,
  type HardwareProverPrepare,
  type HardwareProverReady,
  SCALE_COMMAND,
} from '#tern/contracts';
import { connectNats, Messaging, Namespace, ReplyError } from '#tern/messaging';
import { formatCreds, inboxPrefix, newUserKey } from '#tern/nats-auth';
import { decodeInt32, deviceClaims, encodeInt32, memoryToAllocate, multiply, ReferenceProver } from '#tern/proof';
import { TEST_NATS } from '../support/isolation.js';
import { connectAsMachine } from '../support/nats-users.js';
import { waitFor } from '../support/processes.js';
import { client, registration, tern } from '../machines/harness.js';
import { spec } from '../placement/harness.js';
import { ADMIN, AgentProcess, ControlPlane, removeStateDir } from './harness.js';

/** nvidia-smi as a machine with eight H100s would print it: what the agent's discovery reads. */
function fakeNvidiaSmi(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tern-fake-gpus-'));
  const rows = Array.from(
    { length: 8 },
    (_, i) => `${i}, NVIDIA H100 80GB HBM3, 81559, 550.54, GPU-0000000${i}-0000-0000-0000-000000000000`,
  );
  writeFileSync(
    join(dir, 'nvidia-smi'),
    `#!/bin/sh\nif [ "$#" -gt 0 ]; then\n${rows.map((r) => `  echo '${r}'`).join('\n')}\nelse\n  echo 'CUDA Version: 12.4'\nfi\n`,
  );
  chmodSync(join(dir, 'nvidia-smi'), 0o755);
  return dir;
}

/** A prover's answer on the wire, from the reference prover. */
function wireAnswer(prover: ReferenceProver, probe: HardwareProbe) {
  const a = prover.answer({ vectors: probe.vectors.map((v) => Array.from(decodeInt32(v)!)), rows: probe.rows });
  return {
    products: a.products.map((y) => encodeInt32(y)),
    rows: a.rows.map((r) => ({ index: r.index, values: encodeInt32(r.values), proof: r.proof })),
  };
}

/** Answers the prepare step as an agent does: ready at once, unless `ready` says otherwise. */
function prepares(
  m: Messaging,
  id: string,
  ready: (p: HardwareProverPrepare) => HardwareProverReady | Promise<HardwareProverReady> = () => ({}),
): void {
  m.serve(AGENT_PROOF_PREPARE, id, ready, [id]);
}

/** Answers every challenge honestly with the reference prover, once `before` (a delay, a refusal) is through. */
function answersHonestly(m: Messaging, id: string, before: (c: HardwareChallenge) => Promise<void> = () => Promise.resolve()): void {
  const held = new Map<string, ReferenceProver>();
  m.serve(
    AGENT_PROOF_CHALLENGE,
    id,
    async (c: HardwareChallenge) => {
      await before(c);
      const prover = new ReferenceProver(c);
      held.set(c.challengeId, prover);
      return { root: prover.commitment().root };
    },
    [id],
  );
  m.serve(AGENT_PROOF_PROBE, id, (p: HardwareProbe) => wireAnswer(held.get(p.challengeId)!, p), [id]);
}

/**
 * Proof of hardware end to end: the scheduler challenges machines over their own NATS subjects;
 * real agents answer with the CPU prover; scripted machines, with their own NATS users as an
 * attacker has them, forge the product or answer late.
 */
describe('proof of hardware', () => {
  let plane: ControlPlane;
  let db: pg.Client;
  let harness: NatsConnection;
  const agents: AgentProcess[] = [];
  const cleanups: (() => unknown)[] = [];

  const machine = async (id: string) => (await plane.call<MachineDetail>('GET', `/api/v1/machines/${id}`)).body;
  const verification = (id: string, state: string, timeoutMs: number) =>
    waitFor(
      `${id} ${state}`,
      async () => {
        const m = await machine(id);
        return m.verification?.state === state && m.verification;
      },
      timeoutMs,
      250,
    );

  /** A machine without an agent: registers over HTTPS, heartbeats and answers challenges with its own NATS user. */
  const scripted = async (id: string, answer: (ns: Messaging) => void, gpuModels: string[] = []) => {
    const call = client(plane.base);
    const key = newUserKey();
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'default', machineId: id });
    const reg = await call(
      'POST',
      '/api/v1/machine/register',
      made.body.joinToken,
      registration('default', { natsPublicKey: key.publicKey, gpuModels }),
    );
    expect(reg.status).toBe(200);
    const nc = await connectAsMachine(formatCreds(reg.body.nats.jwt, key.seed), inboxPrefix(plane.namespace, 'agent', id));
    const messaging = new Messaging(nc, new Namespace(plane.namespace));
    answer(messaging);
    let sequence = 0;
    // As an agent beats: core NATS, under its own machine's subject.
    const beat = () => {
      messaging.emit(
        MACHINE_BEAT,
        {
          machineId: id,
          pool: 'default',
          sentAt: new Date().toISOString(),
          sequence: ++sequence,
          cpuPercent: 1,
          memoryPercent: 1,
          gpus: [],
          runningContainers: [],
        },
        [id],
      );
    };
    beat();
    const timer = setInterval(beat, 1000);
    cleanups.push(
      () => clearInterval(timer),
      () => nc.close(),
    );
  };

  beforeAll(async () => {
    plane = await ControlPlane.start('verify', { MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1' });
    db = new pg.Client({ connectionString: plane.schema.url, options: `-c search_path=${plane.schema.schema}` });
    await db.connect();
    harness = await connectNats({ ...TEST_NATS, name: 'verification-test' });
  }, 120_000);

  afterAll(async () => {
    for (const c of cleanups) await c();
    for (const a of agents) {
      await a.stop();
      removeStateDir(a.stateDir);
    }
    await harness?.close();
    await db?.end();
    await plane?.stop();
  });

  it('verifies an honest agent on its real CPU claim, in seconds', async () => {
    const agent = AgentProcess.forPlane(plane, { MACHINE_ID: 'honest-cpu' });
    agents.push(agent);
    agent.start();
    await agent.joined();
    const v = await verification('honest-cpu', 'verified', 30_000);
    expect(v.reason).toMatch(/^proved CPU \(.+\) at [\d.]+ [kMGT]? ?multiply-adds\/s$/);
    expect(v.checkedAt).toBeTruthy();
  }, 90_000);

  it('quarantines a real agent whose discovery sees 8 × H100 that are not there, places no verified-only work on it, and says why', async () => {
    const gpus = fakeNvidiaSmi();
    cleanups.push(() => rmSync(gpus, { recursive: true, force: true }));
    const agent = AgentProcess.forPlane(plane, { MACHINE_ID: 'fake-h100', PATH: `${gpus}:${process.env.PATH}` });
    agents.push(agent);
    const started = Date.now();
    agent.start();
    await agent.joined();
    expect((await machine('fake-h100')).gpus).toHaveLength(8);
    // Its CPU passed; for GPU 0 the agent starts its GPU prover in a container on the GPU the fake
    // nvidia-smi names, which has no device behind it: the prover fails, and says how.
    const v = await waitFor(
      'fake-h100 challenged',
      async () => {
        const { verification } = await machine('fake-h100');
        return verification.checkedAt !== null && verification;
      },
      60_000,
      250,
    );
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(v.state).toBe('quarantined');
    expect(v.reason).toMatch(/^GPU 0 \(NVIDIA H100 80GB HBM3\) refused its challenge: the prover on gpu:0 did not get ready: \S/);

    const shown = await tern(['machine', 'show', 'fake-h100'], plane.base, ADMIN);
    expect(shown.stdout).toMatch(
      /^Hardware\s+quarantined: GPU 0 \(NVIDIA H100 80GB HBM3\) refused its challenge: the prover on gpu:0 did not get ready/m,
    );

    // A deployment for one H100 on verified machines: the only H100s are the unverified machine's.
    const workspaceId = (await db.query(`INSERT INTO workspaces (name) VALUES ('verify') RETURNING id`)).rows[0].id as string;
    const deploymentId = (
      await db.query(
        `INSERT INTO deployments (workspace_id, name, kind, state, latest_version) VALUES ($1, 'needs-h100', 'endpoint', 'ready', 1) RETURNING id`,
        [workspaceId],
      )
    ).rows[0].id as string;
    await db.query(`INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, $2::jsonb)`, [
      deploymentId,
      JSON.stringify(spec({ gpuTypes: ['H100'], gpuCount: 1, verifiedOnly: true })),
    ]);
    const messaging = new Messaging(harness, new Namespace(plane.namespace));
    await messaging.publish(
      SCALE_COMMAND,
      { deploymentId, deploymentVersion: 1, desired: 1, reason: 'test', idleContainers: [], issuedAt: new Date().toISOString() },
      { tokens: [deploymentId] },
    );
    const reason = await waitFor(
      'a placement reason',
      async () => {
        const row = (await db.query(`SELECT placement_reason FROM deployment_versions WHERE deployment_id = $1`, [deploymentId])).rows[0];
        return row?.placement_reason as string | undefined;
      },
      15_000,
    );
    // The verified machine has no H100; the unverified one does not take verified-only work.
    expect(reason).toMatch(/^(no ready machine in pool default with gpu H100|.*verified)/);
    const placed = await db.query(`SELECT machine_id FROM containers WHERE machine_id = 'fake-h100'`);
    expect(placed.rows).toEqual([]);
  }, 120_000);

  it('quarantines a machine that claims 8 × H100 and answers their challenges on its CPU, within 60 s', async () => {
    const started = Date.now();
    await scripted(
      'cpu-h100',
      (m) => {
        // It says it allocated what each GPU claims (the agent's word: only the timing is proof).
        prepares(m, 'cpu-h100', (p) => (p.claimedMemoryBytes ? { allocatedBytes: p.claimedMemoryBytes } : {}));
        const held = new Map<string, ReferenceProver>();
        m.serve(
          AGENT_PROOF_CHALLENGE,
          'cpu-h100',
          async (c: HardwareChallenge) => {
            // The CPU's own challenge is answered honestly. A GPU's product computed on a CPU (a
            // 8192×8192 one takes many minutes here) is still running when the H100's deadline passes.
            if (c.device !== 'cpu') await new Promise((r) => setTimeout(r, c.deadlineMs + 500));
            const prover = new ReferenceProver(c.device === 'cpu' ? c : { ...c, n: 2 });
            held.set(c.challengeId, prover);
            return { root: prover.commitment().root };
          },
          ['cpu-h100'],
        );
        m.serve(AGENT_PROOF_PROBE, 'cpu-h100', (p: HardwareProbe) => wireAnswer(held.get(p.challengeId)!, p), ['cpu-h100']);
      },
      Array.from({ length: 8 }, () => 'NVIDIA H100 80GB HBM3'),
    );
    const v = await verification('cpu-h100', 'quarantined', 60_000);
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(v.reason).toMatch(
      /^GPU 0 \(NVIDIA H100 80GB HBM3\) did not commit to a 8192×8192 int8 product within [\d.]+ s, the time the H100 band's floor of 100 T multiply-adds\/s \(uncalibrated\) allows$/,
    );
    const shown = await tern(['machine', 'show', 'cpu-h100'], plane.base, ADMIN);
    expect(shown.stdout).toMatch(/^Hardware\s+quarantined: GPU 0 \(NVIDIA H100 80GB HBM3\) did not commit/m);
  }, 120_000);

  it("challenges every claimed GPU at once, each with its own seed, once all the GPUs' provers are ready", async () => {
    const asked: { step: 'prepare' | 'challenge'; device: string; at: number; seed?: string }[] = [];
    await scripted(
      'two-h100',
      (m) => {
        prepares(m, 'two-h100', async (p) => {
          // GPU 1 gets ready a second after GPU 0: GPU 0's seed must wait for it.
          if (p.device === 'gpu:1') await new Promise((r) => setTimeout(r, 1000));
          asked.push({ step: 'prepare', device: p.device, at: Date.now() });
          return p.claimedMemoryBytes ? { allocatedBytes: p.claimedMemoryBytes } : {};
        });
        answersHonestly(m, 'two-h100', async (c) => {
          if (c.device === 'cpu') return;
          asked.push({ step: 'challenge', device: c.device, at: Date.now(), seed: c.seed });
          // No GPU here: the product is never in time.
          await new Promise((r) => setTimeout(r, c.deadlineMs + 500));
          throw new ReplyError(500, 'no GPU');
        });
      },
      ['NVIDIA H100 80GB HBM3', 'NVIDIA H100 80GB HBM3'],
    );
    const v = await verification('two-h100', 'quarantined', 30_000);
    expect(v.reason).toMatch(/^GPU 0 \(NVIDIA H100 80GB HBM3\) did not commit to a 8192×8192 int8 product within/);
    const gpus = asked.filter((a) => a.device !== 'cpu');
    // Both provers ready before either seed went out.
    expect(gpus.map((a) => `${a.step} ${a.device}`).slice(0, 2)).toEqual(['prepare gpu:0', 'prepare gpu:1']);
    const [first, second] = gpus.slice(2);
    expect([first, second].map((a) => `${a!.step} ${a!.device}`).sort()).toEqual(['challenge gpu:0', 'challenge gpu:1']);
    // Sent together (one start for both windows), not one after the other's window (8.22 s).
    expect(second!.at - first!.at).toBeLessThan(1000);
    expect(first!.seed).not.toBe(second!.seed);
  }, 60_000);

  it('quarantines a prover that skipped half the product', async () => {
    await scripted('forger', (m) => {
      prepares(m, 'forger');
      const held = new Map<string, ReferenceProver>();
      m.serve(
        AGENT_PROOF_CHALLENGE,
        'forger',
        (c: HardwareChallenge) => {
          const prover = new ReferenceProver(c, (a, b, n) => {
            const product = multiply(a, b, n);
            product.fill(0, (n / 2) * n);
            return product;
          });
          held.set(c.challengeId, prover);
          return { root: prover.commitment().root };
        },
        ['forger'],
      );
      m.serve(AGENT_PROOF_PROBE, 'forger', (p: HardwareProbe) => wireAnswer(held.get(p.challengeId)!, p), ['forger']);
    });
    const v = await verification('forger', 'quarantined', 30_000);
    expect(v.reason).toMatch(/^CPU \(AMD EPYC 7B13\): (row \d+ disagrees with the product it was committed to|the product is not A·B)$/);
  }, 60_000);

  it('quarantines a prover slower than its claimed band', async () => {
    await scripted('slowpoke', (m) => {
      prepares(m, 'slowpoke');
      answersHonestly(m, 'slowpoke', (c) => new Promise((r) => setTimeout(r, c.deadlineMs + 500)));
    });
    const v = await verification('slowpoke', 'quarantined', 30_000);
    expect(v.reason).toMatch(
      /^CPU \(AMD EPYC 7B13\) did not commit to a 256×256 int8 product within [\d.]+ s, the time the CPU band's floor of 5 M multiply-adds\/s \(uncalibrated\) allows$/,
    );
  }, 60_000);

  it('leaves the prepare step out of the timed window: a prover that takes longer to get ready than its deadline still verifies', async () => {
    let deadlineMs = 0;
    await scripted('slow-start', (m) => {
      prepares(m, 'slow-start', async (p) => {
        deadlineMs = deviceClaims({ cpuModel: null, cpuThreads: null, gpus: [] })[0]!.deadlineMs;
        expect(p).toMatchObject({ device: 'cpu', n: 256 });
        await new Promise((r) => setTimeout(r, deadlineMs + 1000));
        return {};
      });
      answersHonestly(m, 'slow-start');
    });
    const v = await verification('slow-start', 'verified', 40_000);
    expect(deadlineMs).toBeGreaterThan(1000);
    expect(v.reason).toMatch(/^proved CPU \(AMD EPYC 7B13\) at /);
  }, 60_000);

  it('quarantines a machine whose GPU prover does not get ready, with its reason, and one that allocates less than the GPU claims', async () => {
    await scripted(
      'no-cuda',
      (m) => {
        prepares(m, 'no-cuda', (p) => {
          if (p.device === 'cpu') return {};
          throw new ReplyError(500, `the prover on ${p.device} did not get ready: no CUDA device for a GPU claim`);
        });
        answersHonestly(m, 'no-cuda');
      },
      ['NVIDIA H100 80GB HBM3'],
    );
    const claimed = 81_559 * 2 ** 20;
    const asked: (number | undefined)[] = [];
    await scripted(
      'small-gpu',
      (m) => {
        prepares(m, 'small-gpu', (p) => {
          if (p.device === 'cpu') return {};
          asked.push(p.claimedMemoryBytes);
          return { allocatedBytes: 24 * 2 ** 30 };
        });
        answersHonestly(m, 'small-gpu');
      },
      ['NVIDIA H100 80GB HBM3'],
    );
    const noCuda = await verification('no-cuda', 'quarantined', 30_000);
    expect(noCuda.reason).toBe(
      'GPU 0 (NVIDIA H100 80GB HBM3) refused its challenge: the prover on gpu:0 did not get ready: no CUDA device for a GPU claim',
    );
    const small = await verification('small-gpu', 'quarantined', 30_000);
    expect(asked[0]).toBe(claimed);
    expect(small.reason).toBe(
      `GPU 0 (NVIDIA H100 80GB HBM3) claims ${claimed} bytes of memory, but its prover allocated ${24 * 2 ** 30} of the ${memoryToAllocate(claimed)} it must (90 %)`,
    );
  }, 60_000);

  it('keeps a machine that answers no challenge unverified, and says so', async () => {
    await scripted('mute', () => undefined);
    const v = await waitFor(
      'mute challenged',
      async () => {
        const { verification } = await machine('mute');
        return verification.checkedAt !== null && verification;
      },
      30_000,
    );
    expect(v).toMatchObject({ state: 'unverified', reason: 'the machine does not answer hardware challenges (no prover listening)' });
  }, 60_000);
});
