import { chooseBuilder } from './builder-choice.js';

describe('chooseBuilder', () => {
  it('picks nothing without builders', () => {
    expect(chooseBuilder('abc', [])).toBeUndefined();
  });

  it('picks the same builder for a spec whatever the order the machines are listed in', () => {
    const machines = ['m-1', 'm-2', 'm-3', 'm-4'];
    const picked = chooseBuilder('spec-1', machines);
    expect(chooseBuilder('spec-1', [...machines].reverse())).toBe(picked);
  });

  it('moves only the specs of a builder that left', () => {
    const machines = ['m-1', 'm-2', 'm-3', 'm-4'];
    const specs = Array.from({ length: 200 }, (_, i) => `spec-${i}`);
    const before = new Map(specs.map((s) => [s, chooseBuilder(s, machines)]));
    const after = new Map(
      specs.map((s) => [
        s,
        chooseBuilder(
          s,
          machines.filter((m) => m !== 'm-2'),
        ),
      ]),
    );
    for (const s of specs) if (before.get(s) !== 'm-2') expect(after.get(s)).toBe(before.get(s));
    // Spread over the builders, not all on one.
    expect(new Set(before.values()).size).toBe(4);
  });
});
