import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The worked examples' tests run with the suite: an example that stops working fails CI.
    include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Integration files each clone their own database and Redis logical db; two workers on two cores.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
  },
});
