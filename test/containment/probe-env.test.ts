/**
 * The containment probe (a short `sleep` moved into a test cgroup) runs with
 * PATH only: the gateway's environment holds credentials, some of them
 * removed from its adapters with envRemove, and a same-uid agent reading
 * /proc finds them in any child that inherited them (fuzz seed 7122026,
 * #986 and #1788).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { spawnProbeProcess } from "../../src/containment/detect.js";

describe("the containment probe", () => {
  it.skipIf(process.platform !== "linux")(
    "holds none of the gateway's environment but PATH (skipped off Linux: /proc/<pid>/environ is read)",
    async () => {
      const key = "PROCLEASE_TEST_PROBE_SECRET";
      process.env[key] = "sk-probe-must-not-see-this";
      try {
        const p = await spawnProbeProcess();
        expect(p.ok).toBe(true);
        if (!p.ok) return;
        try {
          const env = readFileSync(`/proc/${p.pid}/environ`, "utf8").split("\0").filter(Boolean);
          expect(env.map((e) => e.split("=")[0])).toEqual(process.env.PATH === undefined ? [] : ["PATH"]);
        } finally {
          p.stop();
        }
      } finally {
        delete process.env[key];
      }
    },
  );
});
