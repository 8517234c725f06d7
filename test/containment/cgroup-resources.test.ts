// cgroup v2 resources on real processes: limits and memory read where the
// controllers are on v2 (skipped with the reason otherwise), and a missing
// controller answered with its why. cgroup.test.ts has the rest of the lease
// cgroup's life.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  applyLimits,
  createLeaseCgroup,
  detectContainment,
  membersOf,
  readMemory,
  type ContainmentSupport,
} from "../../src/containment/index.js";
import { NOTE, on, SKIP, support } from "./cgroup-setup.js";
import { useLeaseCgroups } from "./lease-cgroups.js";
import { waitFor } from "../supervisor/helpers.js";

if (SKIP) console.log(`containment/cgroup-resources.test:${NOTE}`);

// Controllers on v2 for the lease cgroups, asked for once; the reasons name the test skips.
const withControllers: ContainmentSupport = SKIP
  ? support
  : await detectContainment({ controllers: ["memory", "pids"], allowGatewayMove: false });
const missingWhy = (c: string): string | null => {
  if (!withControllers.available) return withControllers.why;
  if (withControllers.controllers.includes(c)) return null;
  return (
    withControllers.missingControllers.find((m) => m.controller === c)?.why ?? `${c} is not enabled for lease cgroups`
  );
};
const PIDS_SKIP = missingWhy("pids");
const MEMORY_SKIP = missingWhy("memory");
if (PIDS_SKIP) console.log(`containment/cgroup-resources.test: pids.max skipped: ${PIDS_SKIP}`);
if (MEMORY_SKIP) console.log(`containment/cgroup-resources.test: memory skipped: ${MEMORY_SKIP}`);

const { made, children, INSTANCE, nextSeq, lease, startFixture } = useLeaseCgroups("resources");

describe("detection on this host", () => {
  it.skipIf(SKIP)(
    `each wanted controller is either enabled for the leases or comes with an operator-readable why${NOTE}`,
    () => {
      const s = on(withControllers);
      for (const c of ["memory", "pids"]) {
        const missing = s.missingControllers.find((m) => m.controller === c);
        expect(s.controllers.includes(c) !== (missing !== undefined)).toBe(true);
        if (missing) expect(missing.why).toMatch(new RegExp(`${c}`));
      }
      // on a host whose memory controller is bound to v1 (this one), the why says so
      const v1Memory = readFileSync("/proc/cgroups", "utf8")
        .split("\n")
        .some((l) => l.split("\t")[0] === "memory" && l.split("\t")[1] !== "0");
      if (v1Memory) expect(s.missingControllers.find((m) => m.controller === "memory")?.code).toBe("v1-hierarchy");
    },
  );
});

describe("resources", () => {
  it.skipIf(SKIP)(
    `a missing controller is a typed answer with its why, and nothing is half-applied${NOTE}`,
    async () => {
      const cg = await lease("limits-off");
      const mem = await readMemory(cg.path);
      const lim = await applyLimits(cg.path, { memoryMax: 64 * 1024 * 1024, pidsMax: 8 });
      if (MEMORY_SKIP) {
        expect(mem.ok).toBe(false);
        expect(!mem.ok && mem.code).toBe("no-controller");
        expect(!mem.ok && mem.why).toBe(MEMORY_SKIP);
        expect(lim).toEqual({ ok: false, controller: "memory", why: MEMORY_SKIP });
      } else if (PIDS_SKIP) {
        expect(lim).toEqual({ ok: false, controller: "pids", why: PIDS_SKIP });
      } else {
        expect(lim).toEqual({ ok: true, applied: ["memory.max", "pids.max"] });
      }
      await expect(applyLimits(cg.path, { pidsMax: -1 })).rejects.toThrow(TypeError);
      await expect(applyLimits(cg.path, { memoryMax: 1.5 })).rejects.toThrow(TypeError);
      expect(await readMemory(`${cg.path}-missing`)).toEqual({
        ok: false,
        code: "gone",
        why: `${cg.path}-missing does not exist`,
      });
    },
  );

  it.skipIf(SKIP || PIDS_SKIP)(
    `pids.max is enforced inside the lease cgroup${PIDS_SKIP ? ` [skipped: ${PIDS_SKIP}]` : NOTE}`,
    async () => {
      const s = on(withControllers);
      const r = await createLeaseCgroup(s, `test-pids-${process.pid}-${nextSeq()}`, INSTANCE);
      if (!r.ok) throw new Error(r.why);
      made.push(r.cgroup);
      expect(await applyLimits(r.cgroup.path, { pidsMax: 5 })).toEqual({ ok: true, applied: ["pids.max"] });
      await startFixture("fork-storm.sh", [r.cgroup.path, "40"], ["storm"]);
      // pids.events "max N" counts the forks the limit refused
      await waitFor(() => /^max [1-9]/m.test(readFileSync(`${r.cgroup.path}/pids.events`, "utf8")), 15_000);
      const m = await membersOf(r.cgroup.path);
      expect(m.state === "ok" && m.pids.length).toBeLessThanOrEqual(5);
    },
  );

  it.skipIf(SKIP || MEMORY_SKIP)(
    `memory.current/peak are read, and memory.max OOM-kills a runaway inside its own cgroup${MEMORY_SKIP ? ` [skipped: ${MEMORY_SKIP}]` : NOTE}`,
    async () => {
      const s = on(withControllers);
      const r = await createLeaseCgroup(s, `test-mem-${process.pid}-${nextSeq()}`, INSTANCE);
      if (!r.ok) throw new Error(r.why);
      made.push(r.cgroup);
      expect(await applyLimits(r.cgroup.path, { memoryMax: 64 * 1024 * 1024 })).toEqual({
        ok: true,
        applied: ["memory.max"],
      });
      const hog = spawn(
        "/bin/sh",
        [
          "-c",
          `echo $$ > '${r.cgroup.path}/cgroup.procs' && exec ${process.execPath} -e "const a=[];for(;;)a.push(Buffer.alloc(8<<20,1))"`,
        ],
        { stdio: "ignore" },
      );
      children.push(hog);
      await waitFor(() => hog.exitCode !== null || hog.signalCode !== null, 20_000);
      expect(hog.signalCode).toBe("SIGKILL");
      expect(readFileSync(`${r.cgroup.path}/memory.events`, "utf8")).toMatch(/oom_kill [1-9]/);
      const m = await readMemory(r.cgroup.path);
      expect(m.ok).toBe(true);
      if (m.ok && m.peak !== null) expect(m.peak).toBeGreaterThan(32 * 1024 * 1024);
    },
  );
});
