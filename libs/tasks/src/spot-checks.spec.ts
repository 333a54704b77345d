import { randomUUID } from 'node:crypto';
import { chooseVerifier, sampledForSpotCheck, spotCheckDeadline, spotCheckOverdue, type VerifierCandidate } from './spot-checks.js';

describe('spot checks', () => {
  describe('sampledForSpotCheck', () => {
    it('takes every task at 1 and none at 0', () => {
      const ids = Array.from({ length: 200 }, () => randomUUID());
      expect(ids.every((id) => sampledForSpotCheck(id, 1))).toBe(true);
      expect(ids.some((id) => sampledForSpotCheck(id, 0))).toBe(false);
    });

    it('draws the same for the same task, and about the share asked for', () => {
      const ids = Array.from({ length: 20_000 }, () => randomUUID());
      expect(ids.slice(0, 100).map((id) => sampledForSpotCheck(id, 0.3))).toEqual(
        ids.slice(0, 100).map((id) => sampledForSpotCheck(id, 0.3)),
      );
      const share = ids.filter((id) => sampledForSpotCheck(id, 0.02)).length / ids.length;
      // 20,000 draws at p = 0.02: the standard deviation is 0.001, so ±0.005 is five of them.
      expect(Math.abs(share - 0.02)).toBeLessThan(0.005);
    });
  });

  describe('chooseVerifier', () => {
    const c = (machineId: string, score: number | undefined, verified = true): VerifierCandidate => ({
      machineId,
      containerId: `c-${machineId}`,
      verified,
      score,
    });

    it('picks the verified machine of highest reputation above the checked one', () => {
      expect(chooseVerifier('m-1', 0.9, [c('m-1', 0.99), c('m-2', 0.95), c('m-3', 0.97), c('m-4', 0.99, false)])).toEqual({
        chosen: true,
        machineId: 'm-3',
        containerId: 'c-m-3',
      });
    });

    it.each([
      ['no other machine', [c('m-1', 0.99)], /no other machine/],
      ['only unverified ones', [c('m-2', 0.99, false)], /verified/],
      ['a tie', [c('m-2', 0.9)], /above 0.9000/],
      ['only lower ones', [c('m-2', 0.8), c('m-3', undefined)], /above 0.9000/],
    ])('chooses none with %s, saying why', (_what, candidates, why) => {
      const choice = chooseVerifier('m-1', 0.9, candidates);
      expect(choice.chosen).toBe(false);
      expect(!choice.chosen && choice.reason).toMatch(why);
    });
  });

  describe('spotCheckOverdue', () => {
    const requestedAt = '2026-01-01T00:00:00.000Z';
    const at = (seconds: number) => new Date(Date.parse(requestedAt) + seconds * 1000);

    it("waits the task's timeout plus the margin, and not a moment longer", () => {
      expect(spotCheckDeadline(requestedAt, 60, 120)).toEqual(at(180));
      expect(spotCheckOverdue({ state: 'pending', requestedAt }, 60, 120, at(180))).toBe(false);
      expect(spotCheckOverdue({ state: 'pending', requestedAt }, 60, 120, at(181))).toBe(true);
    });

    it('gives a longer task a longer wait', () => {
      expect(spotCheckOverdue({ state: 'pending', requestedAt }, 3600, 120, at(600))).toBe(false);
      expect(spotCheckOverdue({ state: 'pending', requestedAt }, 3600, 120, at(3721))).toBe(true);
    });

    it('never expires a check that has settled', () => {
      for (const state of ['agreed', 'disagreed', 'failed', 'skipped', 'expired'])
        expect(spotCheckOverdue({ state, requestedAt }, 1, 0, at(86_400))).toBe(false);
    });

    it('expires a pending check whose start cannot be read rather than keep it forever', () => {
      expect(spotCheckOverdue({ state: 'pending', requestedAt: 'not a date' }, 60, 120, at(0))).toBe(true);
    });
  });
});
