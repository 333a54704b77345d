// The order jest starts test files in. Two workers share the run, so the run ends when the slower
// worker does: a long file started last leaves the other worker idle for most of it. Jest orders
// by the durations it cached from earlier runs, and by file size where it has none, which is every
// file on a fresh clone (CI): there the whole-stack files (minutes each) came late. Without a
// cached duration, files go by project instead, longest kind first: stack, integration, unit (the
// specs, a second or less each, fill the end); by size within one.
import Sequencer from '@jest/test-sequencer';

const RANK = { stack: 0, integration: 1, unit: 2 };

export default class LongestKindFirst extends (Sequencer.default ?? Sequencer) {
  sort(tests) {
    const sorted = super.sort(tests);
    if (sorted.some((test) => test.duration != null)) return sorted;
    const rank = (test) => RANK[test.context.config.displayName?.name] ?? 1;
    // A stable sort: the size order jest gave stays within a project.
    return [...sorted].sort((a, b) => rank(a) - rank(b));
  }
}
