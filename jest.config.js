// Jest runs in native ESM mode (NestJS 12 ships ESM only); scripts/test.mjs sets
// --experimental-vm-modules. Unit specs sit beside the code; integration tests live in test/.
const shared = {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^#tern/client$': '<rootDir>/sdk/typescript/src/index.ts',
    '^#tern/(.*)$': '<rootDir>/libs/$1/src/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  testEnvironment: 'node',
};

/** Tests that start a whole stack (see the `stack` project below), as regular expressions and as globs. */
const STACK_TESTS = ['/test/e2e/', '/test/up(-[a-z-]+)?\\.test\\.ts$'];
const STACK_GLOBS = ['<rootDir>/test/e2e/**/*.test.ts', '<rootDir>/test/up.test.ts', '<rootDir>/test/up-*.test.ts'];

export default {
  // Integration tests start real processes; unit tests finish far inside this.
  testTimeout: 60_000,
  // Longest kind of test file first where jest has no durations of its own (a fresh clone).
  testSequencer: '<rootDir>/test/support/sequencer.mjs',
  projects: [
    { ...shared, displayName: 'unit', testMatch: ['<rootDir>/{apps,libs,scripts,sdk,bench}/**/*.spec.ts'] },
    {
      ...shared,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      testPathIgnorePatterns: STACK_TESTS,
      globalSetup: '<rootDir>/test/support/global-setup.mjs',
      globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
    },
    {
      // Whole `npm run up` stacks with real containers, run beside the other tests two files at a
      // time: their timing checks (lifetimes to 1 %, cold starts, kills) hold with a neighbour.
      ...shared,
      displayName: 'stack',
      testMatch: STACK_GLOBS,
      globalSetup: '<rootDir>/test/support/global-setup.mjs',
      globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
    },
  ],
};
