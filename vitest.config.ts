import { defineConfig } from "vitest/config";

// Real-process tests contend for 2 cores; a bounded fork pool keeps grace
// periods meaningful instead of starving them.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
