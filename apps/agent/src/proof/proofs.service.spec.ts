import type { HardwareChallenge, HardwareProbe } from '#tern/contracts';
import { decodeInt32, encodeInt32, newChallenge, newProbe, ReferenceProver, verifyAnswer } from '#tern/proof';
import type { Prover } from './prover.js';
import { ProofsService } from './proofs.service.js';

/** The reference prover in this thread: what the CPU prover's worker runs. */
class InProcessProver implements Prover {
  released = false;
  private readonly prover: ReferenceProver;
  constructor(challenge: HardwareChallenge) {
    this.prover = new ReferenceProver(challenge);
  }
  commit() {
    return Promise.resolve(this.prover.commitment().root);
  }
  answer(probe: HardwareProbe) {
    const a = this.prover.answer({ vectors: probe.vectors.map((v) => Array.from(decodeInt32(v)!)), rows: probe.rows });
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

describe('the agent side of a proof', () => {
  let made: InProcessProver[];
  let proofs: ProofsService;
  beforeEach(() => {
    made = [];
    proofs = new ProofsService((c) => {
      const p = new InProcessProver(c);
      made.push(p);
      return p;
    });
  });
  afterEach(() => proofs.onModuleDestroy());

  it('commits, answers the probe from the product it kept, then lets it go', async () => {
    const challenge = challengeOf('c-1');
    const root = await proofs.challenge(challenge);
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

  it('refuses a challenge it holds already, and more than two at once', async () => {
    await proofs.challenge(challengeOf('c-1'));
    await expect(proofs.challenge(challengeOf('c-1'))).rejects.toMatchObject({ code: 409 });
    await proofs.challenge(challengeOf('c-2'));
    await expect(proofs.challenge(challengeOf('c-3'))).rejects.toMatchObject({ code: 429 });
  });

  it('lets a prover go at the challenge deadline: the scheduler stopped waiting', async () => {
    const hanging = new InProcessProver(challengeOf('c-h'));
    hanging.commit = () => new Promise<string>(() => undefined);
    const slow = new ProofsService(() => hanging);
    const pending = slow.challenge(challengeOf('c-h', 50));
    pending.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(hanging.released).toBe(true);
    // Its slot is free again.
    await expect(slow.probe({ challengeId: 'c-h', vectors: [], rows: [] })).rejects.toMatchObject({ code: 404 });
  });
});
