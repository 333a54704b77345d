import type { HardwareChallenge, HardwareProbe } from '#tern/contracts';
import { decodeInt32, encodeInt32, newChallenge, newProbe, ReferenceProver, verifyAnswer } from '#tern/proof';
import type { Prover, ProverReady, ProverRequest } from './prover.js';
import { GpuHolders } from '../containers/gpu-holders.js';
import { MAX_OPEN, ProofsService } from './proofs.service.js';

/** The reference prover in this thread: what the CPU prover's worker runs. */
class InProcessProver implements Prover {
  released = false;
  prepared = false;
  private prover?: ReferenceProver;
  constructor(private readonly request: ProverRequest) {}
  prepare(): Promise<ProverReady> {
    this.prepared = true;
    return Promise.resolve({});
  }
  commit(seed: string) {
    this.prover = new ReferenceProver({ seed, n: this.request.n });
    return Promise.resolve(this.prover.commitment().root);
  }
  answer(probe: HardwareProbe) {
    const a = this.prover!.answer({ vectors: probe.vectors.map((v) => Array.from(decodeInt32(v)!)), rows: probe.rows });
    return Promise.resolve({
      products: a.products.map((y) => encodeInt32(y)),
      rows: a.rows.map((r) => ({ index: r.index, values: encodeInt32(r.values), proof: r.proof })),
    });
  }
  release() {
    this.released = true;
    return Promise.resolve();
  }
}

function challengeOf(id: string, deadlineMs = 10_000): HardwareChallenge {
  return { challengeId: id, device: 'cpu', deadlineMs, ...newChallenge(64) };
}

const prepareOf = (id: string, deadlineMs = 10_000) => ({ challengeId: id, device: 'cpu', n: 64, deadlineMs });

describe('the agent side of a proof', () => {
  let made: InProcessProver[];
  let proofs: ProofsService;
  beforeEach(() => {
    made = [];
    proofs = new ProofsService((c) => {
      const p = new InProcessProver(c);
      made.push(p);
      return p;
    }, new GpuHolders());
  });
  afterEach(() => proofs.onModuleDestroy());

  it('gets a prover ready, commits with it once the seed comes, answers the probe from the product it kept, then lets it go', async () => {
    await expect(proofs.prepare(prepareOf('c-1'))).resolves.toEqual({});
    expect(made).toHaveLength(1);
    const challenge = challengeOf('c-1');
    const root = await proofs.challenge(challenge);
    // The prover made by the prepare step committed: no second one.
    expect(made).toHaveLength(1);
    const probe = newProbe(challenge);
    const reply = await proofs.probe({ challengeId: 'c-1', vectors: probe.vectors.map((v) => encodeInt32(v)), rows: probe.rows });
    const answer = {
      products: reply.products.map((p) => Array.from(decodeInt32(p)!)),
      rows: reply.rows.map((r) => ({ index: r.index, values: Array.from(decodeInt32(r.values)!), proof: r.proof })),
    };
    expect(verifyAnswer(challenge, { root }, probe, answer)).toEqual({ ok: true });
    expect(made[0]!.released).toBe(true);
    await expect(proofs.probe({ challengeId: 'c-1', vectors: [], rows: [] })).rejects.toMatchObject({ code: 404 });
  });

  it('answers a probe in parts from the product it kept, and lets the prover go after the last', async () => {
    await proofs.prepare(prepareOf('c-p'));
    const challenge = challengeOf('c-p');
    const root = await proofs.challenge(challenge);
    const probe = newProbe(challenge);
    const vectors = probe.vectors.map((v) => encodeInt32(v));
    const first = await proofs.probe({ challengeId: 'c-p', vectors, rows: probe.rows.slice(0, 20), more: true });
    expect(made[0]!.released).toBe(false);
    const last = await proofs.probe({ challengeId: 'c-p', vectors, rows: probe.rows.slice(20) });
    expect(made[0]!.released).toBe(true);
    expect(last.products).toEqual(first.products);
    const answer = {
      products: first.products.map((p) => Array.from(decodeInt32(p)!)),
      rows: [...first.rows, ...last.rows].map((r) => ({ index: r.index, values: Array.from(decodeInt32(r.values)!), proof: r.proof })),
    };
    expect(verifyAnswer(challenge, { root }, probe, answer)).toEqual({ ok: true });
  });

  it('holds a GPU from its prepare step until its prover is let go, so no start lands on it meanwhile', async () => {
    const holders = new GpuHolders();
    const gpuProofs = new ProofsService((c) => new InProcessProver(c), holders);
    await gpuProofs.prepare({ ...prepareOf('g-1'), device: 'gpu:1' });
    expect(holders.busy()).toEqual(new Set(['nvidia:1']));
    const challenge = { ...challengeOf('g-1'), device: 'gpu:1' };
    await gpuProofs.challenge(challenge);
    expect(holders.busy()).toEqual(new Set(['nvidia:1']));
    const probe = newProbe(challenge);
    await gpuProofs.probe({ challengeId: 'g-1', vectors: probe.vectors.map((v) => encodeInt32(v)), rows: probe.rows });
    expect(holders.busy()).toEqual(new Set());
    // The CPU's challenge holds no GPU.
    await gpuProofs.prepare(prepareOf('c-2'));
    expect(holders.busy()).toEqual(new Set());
    await gpuProofs.onModuleDestroy();
  });

  it('gets one ready inside the challenge when no prepare step came (a scheduler from before it)', async () => {
    const challenge = challengeOf('c-old');
    await proofs.challenge(challenge);
    expect(made).toHaveLength(1);
    expect(made[0]!.prepared).toBe(true);
  });

  it('refuses a challenge it holds already, and more than the scheduler can send at once', async () => {
    await proofs.prepare(prepareOf('c-1'));
    await expect(proofs.prepare(prepareOf('c-1'))).rejects.toMatchObject({ code: 409 });
    await proofs.challenge(challengeOf('c-1'));
    await expect(proofs.challenge(challengeOf('c-1'))).rejects.toMatchObject({ code: 409 });
    for (let i = 2; i <= MAX_OPEN; i++) await proofs.prepare(prepareOf(`c-${i}`));
    await expect(proofs.prepare(prepareOf('c-last'))).rejects.toMatchObject({ code: 429 });
  });

  it('computes the products of all the GPUs challenged at once side by side', async () => {
    let computing = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const gpus = new ProofsService((c) => {
      const p = new InProcessProver(c);
      const commit = p.commit.bind(p);
      p.commit = async (seed) => {
        computing++;
        await gate;
        return commit(seed);
      };
      return p;
    }, new GpuHolders());
    const ids = [0, 1, 2, 3].map((i) => `g-${i}`);
    await Promise.all(ids.map((id, i) => gpus.prepare({ ...prepareOf(id), device: `gpu:${i}` })));
    const roots = Promise.all(ids.map((id, i) => gpus.challenge({ ...challengeOf(id), device: `gpu:${i}` })));
    // Every product under way before any is done: none waits for another GPU's.
    expect(computing).toBe(4);
    release();
    expect(await roots).toHaveLength(4);
    await gpus.onModuleDestroy();
  });

  it('says the prover did not get ready, with its words, and frees its slot', async () => {
    const broken = new InProcessProver(prepareOf('c-b'));
    broken.prepare = () => Promise.reject(new Error('no CUDA device for a GPU claim'));
    const service = new ProofsService(() => broken, new GpuHolders());
    await expect(service.prepare({ ...prepareOf('c-b'), device: 'gpu:0' })).rejects.toMatchObject({
      code: 500,
      message: 'the prover on gpu:0 did not get ready: no CUDA device for a GPU claim',
    });
    expect(broken.released).toBe(true);
    await expect(service.challenge(challengeOf('c-x'))).rejects.toMatchObject({ code: 500 });
  });

  it('lets a prover go at the prepare deadline and at the challenge deadline: the scheduler stopped waiting', async () => {
    const stuck = new InProcessProver(prepareOf('c-s'));
    stuck.prepare = () => new Promise<ProverReady>(() => undefined);
    const preparing = new ProofsService(() => stuck, new GpuHolders());
    preparing.prepare(prepareOf('c-s', 50)).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(stuck.released).toBe(true);

    const hanging = new InProcessProver(prepareOf('c-h'));
    hanging.commit = () => new Promise<string>(() => undefined);
    const slow = new ProofsService(() => hanging, new GpuHolders());
    await slow.prepare(prepareOf('c-h'));
    const pending = slow.challenge(challengeOf('c-h', 50));
    pending.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(hanging.released).toBe(true);
    // Its slot is free again.
    await expect(slow.probe({ challengeId: 'c-h', vectors: [], rows: [] })).rejects.toMatchObject({ code: 404 });
  });
});
