// The native backend against real processes. Skips (and says why) when the
// addon did not load, so a machine without a compiler still runs the rest.
import { worldReadableCopies } from "../helpers/readable-copy.js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFileSync, chmodSync, mkdtempSync, realpathSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createNativeFacts, loadError, loadNative, nativeAddonPath } from "../../src/facts/native.js";
import { DETAIL_SLOTS, REC_ZOMBIE_LEADER, SLOT } from "../../src/facts/native-binding.js";

const binding = loadNative();
const skipReason = binding ? null : `native addon did not load: ${loadError() ?? "unknown reason"}`;
if (skipReason) console.log(`[native.test] skipping: ${skipReason}`);
const suite = binding ? describe : describe.skip;
const suiteName = binding ? "native facts backend" : `native facts backend (skipped: ${skipReason})`;

const children: ChildProcess[] = [];
const groups: number[] = [];
let tmp = "";

function track(child: ChildProcess): ChildProcess {
  children.push(child);
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

async function spawned(child: ChildProcess): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", () => resolve());
    child.once("error", reject);
  });
  return child.pid!;
}

async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill("SIGKILL");
      await exited(c);
    }
  }
});

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  for (const g of groups) {
    try {
      process.kill(-g, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

suite(suiteName, () => {
  const facts = createNativeFacts(binding!);
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), "proclease-native-"));
  });

  it("declares itself native with exact identity", () => {
    expect(facts.backend).toBe("native");
    expect(facts.identityStrength).toBe("exact");
  });

  it("snapshot lists a spawned child with its ppid, own group/session and sleeping state", async () => {
    const child = track(spawn("sleep", ["30"], { detached: true, stdio: "ignore" }));
    const pid = await spawned(child);
    const info = await waitFor("child to sleep", async () => {
      const p = (await facts.snapshot()).processes.get(pid);
      return p?.state === "S" ? p : undefined;
    });
    expect(info).toMatchObject({ pid, ppid: process.pid, pgid: pid, sid: pid, uid: process.getuid!(), state: "S" });
    expect(info.startTime).toMatch(/^[1-9][0-9]*$/);
    const snap = await facts.snapshot();
    expect(snap.childrenOf(process.pid).map((p) => p.pid)).toContain(pid);
    expect(snap.groupMembers(pid).map((p) => p.pid)).toEqual([pid]);
    // the walk runs on a worker thread while this one waits: we are not "R" here
    expect(snap.processes.get(process.pid)).toMatchObject({ pid: process.pid, ppid: process.ppid });
  });

  it("hands out frozen records, one object per process within a snapshot, and a new walk sees changes", async () => {
    const child = track(spawn("sleep", ["30"], { stdio: "ignore" }));
    const pid = await spawned(child);
    const { first, snap } = await waitFor("child to sleep", async () => {
      const s = await facts.snapshot();
      const p = s.processes.get(pid);
      return p?.state === "S" ? { first: p, snap: s } : undefined;
    });
    expect(Object.isFrozen(first)).toBe(true);
    expect(() => {
      (first as { pid: number }).pid = 1;
    }).toThrow(TypeError);
    // get, the parent index, the group index and iteration all hand out the same record
    expect(snap.processes.get(pid)).toBe(first);
    expect(snap.childrenOf(process.pid).find((p) => p.pid === pid)).toBe(first);
    expect(snap.groupMembers(first.pgid).find((p) => p.pid === pid)).toBe(first);
    expect([...snap.processes.values()].find((p) => p.pid === pid)).toBe(first);
    child.kill("SIGSTOP");
    const stopped = await waitFor("child to stop", async () => {
      const p = (await facts.snapshot()).processes.get(pid);
      return p?.state === "T" ? p : undefined;
    });
    expect(stopped).not.toBe(first);
    expect(stopped).toEqual({ ...first, state: "T" });
    expect(first.state).toBe("S");
  });

  it("parses a comm containing ') (' by the last parenthesis", async () => {
    // comm becomes "a) (b) S 1 2 3": a first-')' parser would read state "(" and garbage ids
    const exe = join(tmp, "a) (b) S 1 2 3");
    copyFileSync("/bin/sleep", exe);
    chmodSync(exe, 0o755);
    const child = track(spawn(exe, ["30"], { detached: true, stdio: "ignore" }));
    const pid = await spawned(child);
    const info = await waitFor("odd comm in snapshot", async () => (await facts.snapshot()).processes.get(pid));
    expect(info).toMatchObject({ pid, ppid: process.pid, pgid: pid, sid: pid });
    expect(["R", "S"]).toContain(info.state);
    const details = await facts.inspect(pid);
    expect(details?.startTime).toBe(info.startTime);
    expect(details?.exePath).toBe(exe);
  });

  it("shows an unreaped child as a zombie ('Z')", async () => {
    // sh forks `true` then execs sleep, which never reaps it
    const child = track(spawn("sh", ["-c", "true & exec sleep 30"], { detached: true, stdio: "ignore" }));
    const pid = await spawned(child);
    const zombie = await waitFor("zombie grandchild", async () =>
      (await facts.snapshot()).childrenOf(pid).find((p) => p.state === "Z"),
    );
    expect(zombie.ppid).toBe(pid);
    const d = await facts.inspect(zombie.pid);
    expect(d?.state).toBe("Z");
    expect(d?.argv).toEqual([]); // a zombie has no memory left to read argv from
    expect(d?.exePath).toBeNull();
  });

  it("inspect returns the exact argv and only the requested env keys", async () => {
    const args = ["-c", "sleep 30; :", "arg0", "with space", `quo"te's`, "ünïcødé ✓", "", "a\tb"];
    const child = track(
      spawn("sh", args, {
        stdio: "ignore",
        // its own group: the shell forks `sleep`, which killing the shell alone would orphan
        detached: true,
        env: { PATH: process.env.PATH, PROCLEASE_T1: "v a=l", PROCLEASE_T2: "", OTHER_SECRET: "x" },
      }),
    );
    const pid = await spawned(child);
    groups.push(pid);
    const d = await facts.inspect(pid, { envKeys: ["PROCLEASE_T1", "PROCLEASE_T2", "PROCLEASE_ABSENT"] });
    expect(d).not.toBeNull();
    expect(d!.argv).toEqual(["sh", ...args]);
    expect(d!.env).toEqual({ PROCLEASE_T1: "v a=l", PROCLEASE_T2: "", PROCLEASE_ABSENT: null });
    expect(d!.envReadable).toBe(true);
    expect(d!.exePath).toBe(realpathSync("/bin/sh"));
    expect(d).toMatchObject({ pid, ppid: process.pid, uid: process.getuid!() });
    expect(d!.bootId).toMatch(/^[0-9a-f-]{36}$/);
    expect(d!.pidNamespace).toMatch(/^pid:\[\d+\]$/);
    const none = await facts.inspect(pid);
    expect(none!.env).toEqual({});
  });

  it("inspects one after another never carry a field over: each answers for its own process", async () => {
    const rich = track(
      spawn("sleep", ["30"], { stdio: "ignore", env: { PATH: process.env.PATH, PROCLEASE_T1: "rich" } }),
    );
    const bare = track(spawn("sleep", ["31"], { stdio: "ignore", env: { PATH: process.env.PATH } }));
    const [r, b] = await Promise.all([spawned(rich), spawned(bare)]);
    const keys = { envKeys: ["PROCLEASE_T1"] };
    // spawn resolves before exec: until then argv and environ are node's
    for (const [pid, arg] of [
      [r, "30"],
      [b, "31"],
    ] as const) {
      await waitFor(`pid ${pid} to exec sleep`, async () =>
        (await facts.inspect(pid))?.argv?.[1] === arg ? true : undefined,
      );
    }
    for (let i = 0; i < 3; i++) {
      expect((await facts.inspect(r, keys))!).toMatchObject({
        pid: r,
        argv: ["sleep", "30"],
        env: { PROCLEASE_T1: "rich" },
        envReadable: true,
      });
      expect((await facts.inspect(b, keys))!).toMatchObject({
        pid: b,
        argv: ["sleep", "31"],
        env: { PROCLEASE_T1: null },
        envReadable: true,
      });
      // a pid no process can have (pid_max is at most 2^22, so the highest pid is 2^22 - 1): nothing of the last answer remains
      expect(await facts.inspect(4_194_304, keys)).toBeNull();
    }
  });

  it("keeps the kernel's ' (deleted)' suffix when the executable was unlinked", async () => {
    const exe = join(tmp, "deleted-sleep");
    copyFileSync("/bin/sleep", exe);
    chmodSync(exe, 0o755);
    const child = track(spawn(exe, ["30"], { stdio: "ignore" }));
    const pid = await spawned(child);
    unlinkSync(exe);
    const d = await facts.inspect(pid);
    expect(d?.exePath).toBe(`${exe} (deleted)`);
  });

  it.each([
    [0, RangeError],
    [-1, RangeError],
    [2 ** 22 + 1, RangeError],
    [Number.NaN, TypeError],
    [1.5, TypeError],
    ["12", TypeError],
  ])("inspect(%s) rejects with %O naming the argument", async (bad, type) => {
    await expect(facts.inspect(bad as number)).rejects.toThrow(type);
    await expect(facts.inspect(bad as number)).rejects.toThrow(/\bpid\b/);
  });

  it("rejects bad envKeys naming the argument, even for a pid that does not exist", async () => {
    await expect(facts.inspect(4_000_000, { envKeys: ["A=B"] })).rejects.toThrow(TypeError);
    await expect(facts.inspect(4_000_000, { envKeys: ["A=B"] })).rejects.toThrow(/envKeys\[0\]/);
    await expect(facts.inspect(4_000_000, { envKeys: "HOME" as unknown as string[] })).rejects.toThrow(/envKeys/);
  });

  it("returns null for a pid that has exited and been reaped", async () => {
    const child = track(spawn("sleep", ["30"], { stdio: "ignore" }));
    const pid = await spawned(child);
    expect(await facts.inspect(pid)).not.toBeNull();
    child.kill("SIGKILL");
    await exited(child);
    expect(await facts.inspect(pid)).toBeNull();
    expect((await facts.snapshot()).processes.has(pid)).toBe(false);
  });

  it("snapshot walks /proc off the main thread: the event loop keeps ticking", async () => {
    // 300 extra sleepers make each walk long enough to see on a 1 ms timer.
    const group = track(
      spawn("sh", ["-c", "i=0; while [ $i -lt 300 ]; do sleep 60 & i=$((i+1)); done; wait"], {
        detached: true,
        stdio: "ignore",
      }),
    );
    const pgid = await spawned(group);
    groups.push(pgid);
    await waitFor(
      "300 sleepers",
      async () => ((await facts.snapshot()).groupMembers(pgid).length >= 301 ? true : undefined),
      20_000,
    );

    // 1. The synchronous part of binding.snapshot() (queueing the worker) is a
    //    small fraction of the walk it starts.
    const syncMs: number[] = [];
    const totalMs: number[] = [];
    for (let i = 0; i < 30; i++) {
      const t0 = performance.now();
      const p = binding!.snapshot();
      syncMs.push(performance.now() - t0);
      await p;
      totalMs.push(performance.now() - t0);
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    console.log(
      `[native.test] snapshot: sync part ${med(syncMs).toFixed(3)} ms of ${med(totalMs).toFixed(3)} ms total (median)`,
    );
    expect(med(syncMs) / med(totalMs)).toBeLessThan(0.1);

    // 2. A 1 ms interval keeps firing while snapshots run back to back.
    let ticks = 0;
    let last = performance.now();
    let maxGap = 0;
    const timer = setInterval(() => {
      const t = performance.now();
      maxGap = Math.max(maxGap, t - last);
      last = t;
      ticks++;
    }, 1);
    const t0 = performance.now();
    let walks = 0;
    while (performance.now() - t0 < 500) {
      await facts.snapshot();
      walks++;
    }
    clearInterval(timer);
    const perWalk = (performance.now() - t0) / walks;
    console.log(
      `[native.test] ${walks} snapshots, ${ticks} ticks, max gap ${maxGap.toFixed(2)} ms, ${perWalk.toFixed(2)} ms per snapshot`,
    );
    // counted, not timed: a walk that held the loop would let no tick fire
    // between snapshots; how long the main thread is held is measured in
    // bench/facts.bench.mjs (CPU time beside the C floor), never here
    expect(ticks).toBeGreaterThan(walks / 4);

    process.kill(-pgid, "SIGKILL");
    await exited(group);
    await waitFor("sleepers gone", async () =>
      (await facts.snapshot()).groupMembers(pgid).every((p) => p.state === "Z") ? true : undefined,
    );
  });

  it("as another user: exe and environment are unreadable (null / envReadable false), argv still read", async (ctx) => {
    if (process.getuid!() !== 0) ctx.skip("not root: no other uid to read as");
    const child = track(spawn("sleep", ["30"], { stdio: "ignore" }));
    const pid = await spawned(child);
    await waitFor("exec of sleep", async () => ((await facts.inspect(pid))?.argv?.[0] === "sleep" ? true : undefined));
    // the checkout may be 0700: the other uid loads the addon from a world-readable copy
    const copy = worldReadableCopies([nativeAddonPath() ?? "addon-not-found"]);
    const script =
      `const s = new Float64Array(${DETAIL_SLOTS + 1}); const t = require(${JSON.stringify(copy.paths[0])}).inspect(${pid}, "PATH", s);` +
      `process.stdout.write(JSON.stringify({ slots: [...s], text: t }))`;
    const run = spawnSync(process.execPath, ["-e", script], {
      uid: 65534,
      gid: 65534,
      cwd: copy.dir,
      encoding: "utf8",
      timeout: 15_000,
    });
    expect(run.status, `${run.error?.message ?? ""} ${run.stderr}`).toBe(0);
    // the raw packing (native-binding.ts SLOT): numbers, then the text of exe, argv and present env values
    const { slots: d, text } = JSON.parse(run.stdout) as { slots: number[]; text: string };
    expect(d[SLOT.pid]).toBe(pid);
    expect([d[SLOT.uid], d[SLOT.realUid]]).toEqual([0, 0]); // uid and realUid from status: sleep runs as root
    expect([d[SLOT.hasExe], d[SLOT.argc], d[SLOT.envReadable], d[DETAIL_SLOTS]]).toEqual([0, 2, 0, 0]);
    expect(text).toBe("sleep\u000030\u0000");
  });

  it("maps unreadable environments to null values for every requested key", async () => {
    const stub = {
      ...binding!,
      inspect: (_pid: number, _keys: string, s: Float64Array): string => {
        s.set([1, 7, 1, 7, 7, 0, -1, "S".charCodeAt(0), REC_ZOMBIE_LEADER, 5, 0, -1, 0, 0, 0]);
        return "";
      },
    };
    const d = await createNativeFacts(stub).inspect(7, { envKeys: ["A", "B"] });
    expect(d).toMatchObject({
      startTime: "5",
      state: "S",
      env: { A: null, B: null },
      envReadable: false,
      exePath: null,
      argv: null,
      zombieLeader: true,
      kernelThread: false,
    });
    expect(d).not.toHaveProperty("realUid"); // -1: status unread, so no claim
  });

  it("subreaper adopts an orphan and reapChildren reaps only what is ours (in a separate process)", () => {
    const addon = nativeAddonPath() ?? "addon-not-found";
    const fixture = fileURLToPath(new URL("../fixtures/native/subreaper.mjs", import.meta.url));
    const run = spawnSync(process.execPath, [fixture, addon], { encoding: "utf8", timeout: 20_000 });
    expect(run.status, run.stderr).toBe(0);
    const r = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(r).toMatchObject({ subreaper: 0, pdeathsig: 0, zombieBeforeReap: true, notOurs: [], goneAfterReap: true });
    expect(r.adoptedPpid).toBe(r.self);
    expect(r.reaped).toEqual([r.orphan]);
  });

  it("agrees with ps on pid, ppid, pgid and sid for every process both saw", async (ctx) => {
    const snap = await facts.snapshot();
    const ps = spawnSync("ps", ["-e", "-o", "pid=,ppid=,pgid=,sid="], { encoding: "utf8" });
    if (ps.error !== undefined) ctx.skip(`no ps to compare with: ${ps.error.message}`);
    expect(ps.status, ps.stderr).toBe(0);
    // other tests re-parent and setsid concurrently: compare only processes
    // the native walks saw unchanged on both sides of the ps run
    const after = await facts.snapshot();
    let compared = 0;
    for (const line of ps.stdout.trim().split("\n")) {
      const [pid, ppid, pgid, sid] = line.trim().split(/\s+/).map(Number);
      const p = snap.processes.get(pid!);
      const q = after.processes.get(pid!);
      if (!p || !q || q.startTime !== p.startTime || q.ppid !== p.ppid || q.pgid !== p.pgid || q.sid !== p.sid)
        continue;
      expect([p.ppid, p.pgid, p.sid]).toEqual([ppid, pgid, sid]);
      compared++;
    }
    expect(compared).toBeGreaterThan(5);
  });
});
