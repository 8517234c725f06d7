/**
 * inspectMany on every backend: one answer per pid, each the answer inspect
 * gives for that pid, on a live system (native: one worker-thread job, or
 * one per core for a large batch;
 * procfs and ps: a loop over inspect).
 */
import { afterAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { createNativeFacts, loadError, loadNative } from "../../src/facts/native.js";
import { createNoneFacts, FactsUnavailableError } from "../../src/facts/none.js";
import { createProcfsFacts } from "../../src/facts/procfs.js";
import { createPsFacts } from "../../src/facts/ps.js";
import type { ProcessDetails, ProcessFacts } from "../../src/facts/types.js";
import { killAll, spawnGroup, spawnTracked, waitFor } from "../fixtures/facts/procs.js";

const binding = loadNative();
const hasPs = existsSync("/bin/ps") || existsSync("/usr/bin/ps");
const rows: Array<{ name: string; make: () => ProcessFacts; skip: string | null; sample: number }> = [
  {
    name: "native",
    make: () => createNativeFacts(binding!),
    skip: binding === null ? `native addon not loaded: ${loadError()}` : null,
    sample: Infinity,
  },
  {
    name: "procfs",
    make: () => createProcfsFacts(),
    skip: process.platform === "linux" ? null : `procfs needs Linux, this is ${process.platform}`,
    sample: Infinity,
  },
  // every ps inspect is a fork and exec: a sample of the table is enough
  { name: "ps", make: () => createPsFacts(), skip: hasPs ? null : "no ps binary on this host", sample: 40 },
];
for (const r of rows) if (r.skip !== null) console.log(`[inspect-many] skipping ${r.name}: ${r.skip}`);

const KEYS = ["PATH", "PROCLEASE_NO_SUCH_KEY"];
/** the fields that may change between two reads of one live process: none but its run state */
const stable = (d: ProcessDetails) => ({ ...d, state: "" });

afterAll(killAll);

for (const row of rows) {
  const title = (t: string) => (row.skip === null ? `${row.name}: ${t}` : `${row.name}: ${t} (skipped: ${row.skip})`);
  const test = row.skip === null ? it : it.skip;

  describe(`inspectMany, ${row.name} backend`, () => {
    test(title("agrees with inspect for every pid of a live snapshot"), async () => {
      const facts = row.make();
      const one = spawnTracked("sleep", ["30"], { env: { PATH: "/bin:/usr/bin", PROCLEASE_MARK: "1" } });
      const group = spawnGroup("sh", ["-c", "sleep 30 & sleep 30"]);
      // a child between fork and exec changes argv under the same start time: let ours settle first
      await waitFor("the test's children to exec sleep", async () => {
        const members = (await createProcfsFacts().snapshot())
          .groupMembers(group.pid)
          .map((p) => p.pid)
          .filter((p) => p !== group.pid);
        const argv0 = await Promise.all(
          [one.pid, ...members].map(async (p) => (await createProcfsFacts().inspect(p))?.argv?.[0]),
        );
        return members.length >= 1 && argv0.every((a) => a === "sleep");
      });
      const snap = await facts.snapshot();
      let pids = [...snap.processes.keys()];
      // the lowest pids are the host's long-lived ones; the test's own sleepers are always in
      // this worker too: it lives through the test and its facts do not change
      const ours = [process.pid, one.pid, ...snap.groupMembers(group.pid).map((p) => p.pid)];
      if (pids.length > row.sample) pids = [...new Set([...ours, ...pids.slice(0, row.sample)])];
      // read each pid alone before and after the batch: where both reads agree the
      // process did not change (exit, exec, reuse) meanwhile, and the batch must agree too
      const each = async () => {
        const out: Array<ProcessDetails | null> = [];
        for (const pid of pids) out.push(await facts.inspect(pid, { envKeys: KEYS }));
        return out;
      };
      const before = await each();
      const many = await facts.inspectMany(pids, { envKeys: KEYS });
      // every pid came from the snapshot: read as listed, only realUid may be left out
      const listed = await facts.inspectMany(pids, { envKeys: KEYS, listed: true });
      const after = await each();
      expect(many).toHaveLength(pids.length);
      expect(listed).toHaveLength(pids.length);
      let compared = 0;
      const oursCompared = new Set<number>();
      for (const [i, pid] of pids.entries()) {
        const [b, a] = [before[i]!, after[i]!];
        const settled = b === null ? a === null : a !== null && JSON.stringify(stable(b)) === JSON.stringify(stable(a));
        if (!settled) continue;
        if (b === null) {
          expect(many[i], `pid ${pid}: gone before and after`).toBeNull();
          expect(listed[i], `pid ${pid}: gone before and after (listed)`).toBeNull();
        } else {
          expect(stable(many[i]!), `pid ${pid}`).toEqual(stable(b));
          expect({ ...stable(listed[i]!), realUid: undefined }, `pid ${pid} (listed)`).toEqual({
            ...stable(b),
            realUid: undefined,
          });
        }
        compared++;
        if (ours.includes(pid)) oursCompared.add(pid);
      }
      // ours always settle, so the comparison is never empty. How much of the rest
      // settles depends on the host (beside other suites' short-lived children most of
      // its table can turn over between the two passes), so no share of it is asserted
      expect([...oursCompared].sort()).toEqual([...ours].sort());
    });

    test(title("a vanished pid is null, never an error for the batch; duplicates answer each time"), async () => {
      const facts = row.make();
      const c = spawnTracked("true", []);
      await new Promise((r) => c.once("exit", r));
      const out = await facts.inspectMany([process.pid, c.pid, process.pid], { envKeys: ["PATH"] });
      expect(out).toHaveLength(3);
      expect(out[1]).toBeNull();
      expect(out[0]?.pid).toBe(process.pid);
      expect(out[2]?.startTime).toBe(out[0]?.startTime);
    });

    test(title("a batch large enough to be read by several jobs answers in request order"), async () => {
      const facts = row.make();
      const c = spawnTracked("true", []);
      await new Promise((r) => c.once("exit", r));
      // 160 pids: the native backend reads them as one job per core; the answers come back in the asked order
      const pids = Array.from({ length: 160 }, (_, i) => [process.pid, c.pid, 1][i % 3]!);
      const out = await facts.inspectMany(pids);
      expect(out).toHaveLength(pids.length);
      for (const [i, pid] of pids.entries()) {
        if (pid === c.pid) expect(out[i], `index ${i}: the exited child`).toBeNull();
        else expect(out[i]?.pid, `index ${i}`).toBe(pid);
      }
    });

    test(title("an empty list answers [] without reading anything"), async () => {
      expect(await row.make().inspectMany([])).toEqual([]);
    });

    test(title("bad pids and keys are refused before anything is read, naming the argument"), async () => {
      const facts = row.make();
      await expect(facts.inspectMany([1, 0])).rejects.toThrow(RangeError);
      await expect(facts.inspectMany([1, 0])).rejects.toThrow(/pids\[1\]/);
      await expect(facts.inspectMany([1.5])).rejects.toThrow(TypeError);
      await expect(facts.inspectMany(["1" as unknown as number])).rejects.toThrow(TypeError);
      await expect(facts.inspectMany(7 as unknown as number[])).rejects.toThrow(TypeError);
      await expect(facts.inspectMany([1], { envKeys: ["A=B"] })).rejects.toThrow(TypeError);
    });
  });
}

describe("inspectMany, none backend", () => {
  it("rejects with FactsUnavailableError: nothing about any pid is known; bad input is still a TypeError", async () => {
    const none = createNoneFacts();
    await expect(none.inspectMany([process.pid])).rejects.toThrow(FactsUnavailableError);
    await expect(none.inspectMany([0])).rejects.toThrow(RangeError);
  });
});

describe("inspectMany, native backend: the batch is one job off the main thread", () => {
  it.skipIf(binding === null)(
    `a thousand pids resolve in one call and their reads leave the event loop free${binding === null ? ` (skipped: ${loadError()})` : ""}`,
    async () => {
      const facts = createNativeFacts(binding!);
      const pids = Array.from({ length: 1000 }, () => process.pid);
      let ticks = 0;
      const timer = setInterval(() => ticks++, 0);
      try {
        const out = await facts.inspectMany(pids, { envKeys: ["PATH"] });
        expect(out.every((d) => d?.pid === process.pid && d.env.PATH === process.env.PATH)).toBe(true);
      } finally {
        clearInterval(timer);
      }
      // not a timing claim: the loop ran timers while the job was on the pool (a synchronous read of 1,000 would starve them)
      expect(ticks).toBeGreaterThan(0);
    },
  );
});
