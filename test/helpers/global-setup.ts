/**
 * vitest globalSetup: the run's own instance index (vitest.config.ts sets
 * PROCLEASE_INSTANCE_INDEX to a temp dir named by the runner's pid) is
 * removed when the run ends. The host's index is never touched by tests.
 */
import { rmSync } from "node:fs";
import { basename } from "node:path";

export default function setup(): () => void {
  const index = process.env.PROCLEASE_INSTANCE_INDEX;
  return () => {
    if (index !== undefined && basename(index) === `proclease-test-index-${process.pid}`)
      rmSync(index, { recursive: true, force: true });
  };
}
