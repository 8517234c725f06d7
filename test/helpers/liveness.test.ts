/**
 * The tests' own /proc oracle (test/helpers/liveness.ts) beside the library's
 * facts and liveness rule, on real processes: they must agree on the plain
 * cases (a running child, a zombie, a reaped pid, the stat fields), and on the
 * one edge the library handles on purpose, a zombie leader with live threads,
 * both readings are asserted: the leader's own stat line says Z (dead, read
 * alone), while the library and the oracle's task scan say alive.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { isAlive } from "../../src/facts/liveness.js";
import {
  buildCHelper,
  killAll,
  printed,
  removeCHelpers,
  spawnTracked,
  waitFor,
  exited,
} from "../fixtures/facts/procs.js";
import { environEntries, isAliveSync, leaderRuns, readStat } from "./liveness.js";

const facts = getProcessFacts();
const zombieLeader = buildCHelper("zombie-leader");
afterEach(() => killAll());
afterAll(() => removeCHelpers());

describe("the tests' liveness oracle against the library", () => {
  it("a running child: alive by both; stat fields read by hand equal the library's", async () => {
    const child = spawnTracked("/bin/sh", ["-c", "exec sleep 30"], {
      detached: true,
      env: { ...process.env, ORACLE_MARK: "x y" },
    });
    // The state letter is compared too, so both reads must see the same one:
    // wait until sleep is asleep (S). Just after exec it may still read R, and
    // a read on either side of that moment would differ without a defect.
    const st = await waitFor("the child to exec sleep and be asleep", async () => {
      const s = readStat(child.pid);
      return s?.comm === "sleep" && s.state === "S" ? s : null;
    });
    const d = await facts.inspect(child.pid, { envKeys: ["ORACLE_MARK"] });
    expect(d).not.toBeNull();
    expect({
      pid: d!.pid,
      ppid: d!.ppid,
      pgid: d!.pgid,
      sid: d!.sid,
      state: d!.state,
      startTime: d!.startTime,
    }).toEqual({
      pid: child.pid,
      ppid: process.pid,
      pgid: child.pid,
      sid: child.pid,
      state: st!.state,
      startTime: facts.backend === "native" || facts.backend === "procfs" ? st!.starttime : d!.startTime,
    });
    expect(st).toMatchObject({ ppid: process.pid, pgrp: child.pid, session: child.pid });
    expect(isAliveSync(child.pid)).toBe(true);
    expect(isAlive(d!)).toBe(true);
    expect(environEntries(child.pid)).toContain("ORACLE_MARK=x y");
    expect(d!.env.ORACLE_MARK).toBe("x y");
  });

  it("a zombie (exited, not yet waited for) is dead by both", async () => {
    // sleep 0 exits at once; the exec'd sleep 30 is its parent and never waits
    const parent = spawnTracked("/bin/sh", ["-c", "sleep 0 & exec sleep 30"]);
    const zombie = await waitFor("a zombie child", async () => {
      for (const tid of (await import("node:fs")).readdirSync("/proc")) {
        const st = /^\d+$/.test(tid) ? readStat(Number(tid)) : null;
        if (st && st.ppid === parent.pid && st.state === "Z") return st;
      }
      return null;
    });
    expect(isAliveSync(zombie.pid)).toBe(false);
    expect(leaderRuns(zombie.pid)).toBe(false);
    const d = await facts.inspect(zombie.pid);
    expect(d?.state).toBe("Z");
    expect(isAlive(d!)).toBe(false);
  });

  it("a reaped pid is dead by both: no stat line, no facts", async () => {
    const child = spawnTracked("/bin/true", []);
    await exited(child);
    // reaped by Node: the pid is free (it may be reused, but not by a zombie of ours within this test)
    const st = readStat(child.pid);
    if (st !== null) {
      // a new process took the pid: the oracle and the library still agree about it
      expect(isAliveSync(child.pid)).toBe(isAlive((await facts.inspect(child.pid)) ?? { state: "X" }));
      return;
    }
    expect(isAliveSync(child.pid)).toBe(false);
    expect(await facts.inspect(child.pid)).toBeNull();
  });

  const zlTitle =
    "a zombie leader with live threads: the leader's own stat says Z, the library and the oracle's task scan say alive";
  it.skipIf(zombieLeader.path === null)(
    zombieLeader.path === null ? `${zlTitle} [skipped: ${zombieLeader.why}]` : zlTitle,
    async () => {
      const child = spawnTracked(zombieLeader.path!, []);
      await printed(child, "ready"); // the main thread has called pthread_exit
      await waitFor("the leader to read as Z", async () => readStat(child.pid)?.state === "Z");
      // the reading that looks at the leader alone: dead
      expect(readStat(child.pid)!.state).toBe("Z");
      expect(leaderRuns(child.pid)).toBe(false);
      // the library's reading, on purpose: alive (a signal to the pid reaches the thread that runs on)
      const d = await facts.inspect(child.pid);
      expect(d).toMatchObject({ state: "Z", zombieLeader: true });
      expect(isAlive(d!)).toBe(true);
      // the oracle's reading, from the tasks: alive, in agreement with the library
      expect(isAliveSync(child.pid)).toBe(true);
      process.kill(child.pid, "SIGKILL");
      await exited(child);
      expect(isAliveSync(child.pid)).toBe(false);
    },
  );
});
