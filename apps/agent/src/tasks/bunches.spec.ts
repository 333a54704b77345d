import type { TaskItem } from '#tern/contracts';
import { bunchable, bunchesOf, isMapChunk } from './bunches.js';

const task = (payload: unknown) => ({ payload }) as TaskItem;
const chunk = task({ __tern_map_chunk__: { inputs: [1], return_exceptions: false } });

describe('bunches: which tasks a runner takes in one call', () => {
  it("reads the runner's header: 2 plain tasks and map chunks, 1 map chunks only, anything else none", () => {
    expect(bunchesOf('2')).toBe('plain');
    expect(bunchesOf('1')).toBe('chunks');
    expect(bunchesOf(undefined)).toBe('none');
    expect(bunchesOf('3')).toBe('none');
    expect(bunchesOf(['2', '2'])).toBe('none');
  });

  it('an earlier runner gets map chunks only; a custom server none', () => {
    for (const payload of [{ x: 1 }, 'text', 7, [1, 2]]) {
      expect(isMapChunk(task(payload))).toBe(false);
      expect(bunchable('plain', task(payload))).toBe(true);
      expect(bunchable('chunks', task(payload))).toBe(false);
      expect(bunchable('none', task(payload))).toBe(false);
    }
    expect(bunchable('plain', chunk)).toBe(true);
    expect(bunchable('chunks', chunk)).toBe(true);
    expect(bunchable('none', chunk)).toBe(false);
  });
});
