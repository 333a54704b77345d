// Jest runs in native ESM mode (NestJS 12 ships ESM only); scripts/test.mjs sets
// --experimental-vm-modules. Unit specs sit beside the code; integration tests live in test/.
const shared = {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^#tern/(.*)$': '<rootDir>/libs/$1/src/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  testEnvironment: 'node',
};

export default {
  // Integration tests start real processes; unit tests finish far inside this.
  testTimeout: 60_000,
  projects: [
    { ...shared, displayName: 'unit', testMatch: ['<rootDir>/{apps,libs,scripts}/**/*.spec.ts'] },
    {
      ...shared,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.mjs',
      globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
    },
  ],
};
