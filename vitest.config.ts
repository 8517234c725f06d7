import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

// The run's own instance index (src/ownership/host/instance-index.ts), removed by
// the global teardown: test state dirs never land in the host's index.
process.env.PROCLEASE_INSTANCE_INDEX ??= join(tmpdir(), `proclease-test-index-${process.pid}`);

// Real-process tests contend for 2 cores; a bounded fork pool keeps grace
// periods meaningful instead of starving them.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // an interrupted run (SIGTERM/SIGINT to the runner's group) leaves nothing: test/helpers/interrupt-setup.ts
    setupFiles: ["test/helpers/interrupt-setup.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
  },
});
