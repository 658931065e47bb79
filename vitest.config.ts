import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // A safety net, not a measure: a test's waits have deadlines of their own. The deterministic
    // simulations are CPU-bound and ran 5–6× longer than on CI with every core busy.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Two cores in CI: keep parallelism modest so timing-based tests stay stable.
    maxWorkers: 2,
  },
});
