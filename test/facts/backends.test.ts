/**
 * One suite, every backend (bufferutil style): the same real processes must
 * look the same through native, procfs and ps, except for what a backend
 * documents it cannot see (ps: no argv, no exe, env unknown).
 */
import { chmod, copyFile, mkdtemp, readFile, realpath, rm } from "node:fs/promises";
import { existsSync, readFileSync, readdirSync, statSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createNativeFacts, loadError, loadNative } from "../../src/facts/native.js";
import { FactsUnavailableError, createNoneFacts } from "../../src/facts/none.js";
import { createProcfsFacts } from "../../src/facts/procfs.js";
import { createPsFacts } from "../../src/facts/ps.js";
import { getProcessFacts } from "../../src/facts/get.js";
import { MAX_PID } from "../../src/facts/validate.js";
import type { ProcessFacts, ProcessInfo } from "../../src/facts/types.js";
import {
  buildCHelper,
  exited,
  isRunning,
  killAll,
  printed,
  removeCHelpers,
  spawnDeepExe,
  spawnGroup,
  spawnTracked,
  waitFor,
} from "../fixtures/facts/procs.js";

const binding = loadNative();
const isLinux = process.platform === "linux";
const hasPs = existsSync("/bin/ps") || existsSync("/usr/bin/ps");

interface Row {
  name: string;
  make: () => ProcessFacts;
  skip: string | null;
  /** what inspect can tell beyond the cheap fields */
  deep: boolean;
}

const rows: Row[] = [
  {
    name: "native",
    make: () => createNativeFacts(binding!),
    skip: binding === null ? `native addon not loaded: ${loadError()}` : null,
    deep: true,
  },
  {
    name: "procfs",
    make: () => createProcfsFacts(),
    skip: isLinux ? null : `procfs needs Linux, this is ${process.platform}`,
    deep: true,
  },
  { name: "ps", make: () => createPsFacts(), skip: hasPs ? null : "no ps binary on this host", deep: false },
];

for (const r of rows) if (r.skip !== null) console.log(`[backends] skipping ${r.name}: ${r.skip}`);

const SH = existsSync("/bin/sh") ? "/bin/sh" : "sh";

afterEach(killAll);

const zombieLeaderHelper = buildCHelper("zombie-leader");
const nondumpableHelper = buildCHelper("nondumpable");
const envexecHelper = buildCHelper("envexec");
const deepexecHelper = buildCHelper("deepexec");
for (const [name, h] of [
  ["zombie-leader", zombieLeaderHelper],
  ["nondumpable", nondumpableHelper],
  ["envexec", envexecHelper],
  ["deepexec", deepexecHelper],
] as const) {
  if (h.path === null) console.log(`[backends] tests needing the ${name} helper are skipped: ${h.why}`);
}
afterAll(removeCHelpers);

describe.each(rows)("facts backend $name", (row) => {
  const title = (t: string) => (row.skip === null ? t : `${t} (skipped: ${row.skip})`);
  const test = row.skip === null ? it : it.skip;
  let facts: ProcessFacts;
  let self: ProcessInfo;
  let tmp: string;

  beforeAll(async () => {
    if (row.skip !== null) return;
    facts = row.make();
    const snap = await facts.snapshot();
    self = snap.processes.get(process.pid)!;
    tmp = await mkdtemp(join(tmpdir(), "proclease-facts-"));
  });
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  /** Until the child has exec'd, its facts are a copy of node's. */
  async function waitExec(pid: number, argv0: string): Promise<void> {
    await waitFor(`pid ${pid} to exec ${argv0}`, async () => {
      if (isLinux) {
        const cmd = await readFile(`/proc/${pid}/cmdline`, "latin1").catch(() => "");
        return cmd.split("\0")[0] === argv0;
      }
      return (await facts.inspect(pid)) !== null;
    });
  }

  test(title("identity and the cheap fields of a child with a known argv and env"), async () => {
    // `read` is a builtin: the shell itself blocks on stdin, with no grandchild to orphan
    const argv = ["-c", "read x", "name with space", "x\ty"];
    const value = "v=1 2\u00e9";
    const child = spawnTracked(SH, argv, {
      env: { PATH: process.env.PATH, PROCLEASE_TEST_KEY: value },
      stdio: ["pipe", "ignore", "inherit"],
    });
    await waitExec(child.pid, SH);
    expect(facts.backend).toBe(row.name);
    expect(facts.identityStrength).toBe(row.name === "ps" ? "coarse" : "exact");

    // right after exec a child may be briefly R or D (faulting its pages in): wait for the sleep
    const snap = await waitFor("the child to sleep", async () => {
      const s = await facts.snapshot();
      return s.processes.get(child.pid)?.state === "S" ? s : null;
    });
    const p = snap.processes.get(child.pid);
    expect(p).toBeDefined();
    expect(p).toMatchObject({ pid: child.pid, ppid: process.pid, pgid: self.pgid, uid: process.getuid!() });
    if (row.name !== "ps" || process.platform !== "darwin") expect(p!.sid).toBe(self.sid);
    expect(snap.childrenOf(process.pid).map((c) => c.pid)).toContain(child.pid);
    expect(snap.groupMembers(self.pgid).map((c) => c.pid)).toContain(child.pid);
    expect(p!.startTime).toMatch(/^\d+$/);
    if (row.name === "ps") {
      // epoch seconds, and this child started just now
      expect(Math.abs(Number(p!.startTime) - Date.now() / 1000)).toBeLessThan(120);
    }

    const d = await facts.inspect(child.pid, { envKeys: ["PROCLEASE_TEST_KEY", "PROCLEASE_MISSING"] });
    expect(d).not.toBeNull();
    expect(d).toMatchObject({
      pid: child.pid,
      ppid: process.pid,
      pgid: self.pgid,
      uid: process.getuid!(),
      startTime: p!.startTime,
    });
    expect(Object.keys(d!.env).sort()).toEqual(["PROCLEASE_MISSING", "PROCLEASE_TEST_KEY"]);
    if (row.deep) {
      expect(d!.argv).toEqual([SH, ...argv]);
      expect(d!.exePath).toBe(await realpath(SH));
      expect(d!.env).toEqual({ PROCLEASE_TEST_KEY: value, PROCLEASE_MISSING: null });
      expect(d!.envReadable).toBe(true);
      if (isLinux) {
        expect(d!.bootId).toBe((await readFile("/proc/sys/kernel/random/boot_id", "utf8")).trim());
        expect(d!.pidNamespace).toMatch(/^pid:\[\d+\]$/);
      }
    } else {
      // ps cannot give these: documented as unknown, never guessed
      expect(d!.argv).toBeNull();
      expect(d!.exePath).toBeNull();
      expect(d!.env).toEqual({ PROCLEASE_TEST_KEY: null, PROCLEASE_MISSING: null });
      expect(d!.envReadable).toBe(false);
    }
  });

  test(title("a comm containing ') (' parses"), async () => {
    const exe = join(tmp, "x) (y");
    await copyFile(existsSync("/bin/sleep") ? "/bin/sleep" : "/usr/bin/sleep", exe);
    await chmod(exe, 0o755);
    const child = spawnTracked(exe, ["30"]);
    await waitExec(child.pid, exe);
    const snap = await waitFor("the child to sleep", async () => {
      const s = await facts.snapshot();
      return s.processes.get(child.pid)?.state === "S" ? s : null;
    });
    expect(snap.processes.get(child.pid)).toMatchObject({
      pid: child.pid,
      ppid: process.pid,
      pgid: self.pgid,
      state: "S",
    });
    const d = await facts.inspect(child.pid);
    expect(d).toMatchObject({ pid: child.pid, ppid: process.pid, state: "S" });
    if (row.deep) {
      expect(d!.exePath).toBe(exe);
      expect(d!.argv).toEqual([exe, "30"]);
    }
  });

  test(title("a zombie is reported with state Z"), async () => {
    // The shell forks a short sleep, then execs a long one that never waits:
    // the short sleep becomes a zombie child of the long one.
    const parent = spawnTracked(SH, ["-c", "sleep 0.1 & exec sleep 30"]);
    const zombie = await waitFor("a zombie child", async () => {
      const snap = await facts.snapshot();
      return snap.childrenOf(parent.pid).find((c) => c.state === "Z") ?? null;
    });
    expect(zombie.ppid).toBe(parent.pid);
    const d = await facts.inspect(zombie.pid);
    expect(d).not.toBeNull();
    expect(d!.state).toBe("Z");
    expect(d!.startTime).toBe(zombie.startTime);
    if (row.deep) expect(d!.exePath).toBeNull(); // a zombie has no mm: nothing to read, nothing guessed
  });

  const zlTest = row.skip === null && zombieLeaderHelper.path !== null ? it : it.skip;
  const zlTitle = (t: string) =>
    zombieLeaderHelper.path === null ? `${t} (skipped: ${zombieLeaderHelper.why})` : title(t);
  zlTest(
    zlTitle("a leader in Z whose other thread runs on is alive: zombieLeader, and a signal to its pid ends it"),
    async () => {
      const child = spawnTracked(zombieLeaderHelper.path!, []);
      await printed(child, "ready"); // the main thread has exited
      const p = await waitFor("the leader to read as Z", async () => {
        const q = (await facts.snapshot()).processes.get(child.pid);
        return q?.state === "Z" ? q : null;
      });
      expect(p).toMatchObject({
        pid: child.pid,
        ppid: process.pid,
        state: "Z",
        zombieLeader: true,
        kernelThread: false,
      });
      const d = await facts.inspect(child.pid);
      expect(d).toMatchObject({ pid: child.pid, state: "Z", zombieLeader: true, startTime: p.startTime });
      if (row.deep) expect(d!.exePath).toBeNull(); // the leader's mm is gone: nothing is guessed
      // it is a live process: a signal to the tgid reaches the thread that runs on
      expect(isRunning(child)).toBe(true);
      process.kill(child.pid, "SIGTERM");
      await exited(child);
      expect(child.signalCode).toBe("SIGTERM");
      expect(await facts.inspect(child.pid)).toBeNull();
    },
  );

  test(
    title("a plain zombie is not a zombie leader; our own process is neither that nor a kernel thread"),
    async () => {
      const parent = spawnTracked(SH, ["-c", "sleep 0.1 & exec sleep 30"]);
      const zombie = await waitFor("a zombie child", async () => {
        const snap = await facts.snapshot();
        return snap.childrenOf(parent.pid).find((c) => c.state === "Z") ?? null;
      });
      expect(zombie.zombieLeader).toBe(false);
      expect((await facts.inspect(zombie.pid))!.zombieLeader).toBe(false);
      const snap = await facts.snapshot();
      expect(snap.processes.get(process.pid)).toMatchObject({ kernelThread: false, zombieLeader: false });
      expect((await facts.inspect(process.pid))!.kernelThread).toBe(false);
    },
  );

  const kthreadd = isLinux ? readStat2() : null;
  const ktTest = row.skip === null && kthreadd !== null ? it : it.skip;
  ktTest(
    title(
      kthreadd === null
        ? "kernel threads (skipped: no kthreadd (pid 2) visible in this pid namespace)"
        : "kernel threads are marked: kthreadd (pid 2) and its children",
    ),
    async () => {
      const snap = await facts.snapshot();
      expect(snap.processes.get(2)).toMatchObject({ pid: 2, kernelThread: true });
      const kids = snap.childrenOf(2);
      expect(kids.length).toBeGreaterThan(0);
      for (const k of kids) expect(k.kernelThread, `pid ${k.pid}`).toBe(true);
      expect(snap.processes.get(1)?.kernelThread ?? false).toBe(false);
      expect((await facts.inspect(2))!.kernelThread).toBe(true);
    },
  );

  const helperTest = (h: { path: string | null; why: string }) => (row.skip === null && h.path !== null ? it : it.skip);
  const helperTitle = (h: { path: string | null; why: string }, t: string) =>
    h.path === null ? `${t} (skipped: ${h.why})` : title(t);

  helperTest(nondumpableHelper)(
    helperTitle(
      nondumpableHelper,
      "a non-dumpable process (its /proc files owned by root): uid is its effective uid, realUid its real one",
    ),
    async () => {
      // As root the helper sets real and effective uid apart (which also
      // makes it non-dumpable); otherwise it only drops dumpability.
      const root = process.geteuid!() === 0;
      const child = spawnTracked(nondumpableHelper.path!, root ? ["65533", "65534"] : []);
      await printed(child, "ready");
      const euid = root ? 65534 : process.geteuid!();
      const ruid = root ? 65533 : process.getuid!();
      expect(statSync(`/proc/${child.pid}/stat`).uid).toBe(0); // the premise: stat's owner says root

      const d = await facts.inspect(child.pid);
      expect(d).toMatchObject({ pid: child.pid, uid: euid });
      if (row.deep) expect(d!.realUid).toBe(ruid);

      // every backend, whoever asks: the effective uid (ps prints it; native and
      // procfs read the owner of /proc/PID, which the kernel keeps at the euid)
      const snap = await facts.snapshot();
      expect(snap.processes.get(child.pid)?.uid).toBe(euid);
      expect(snap.processes.get(process.pid)?.uid).toBe(process.geteuid!()); // a dumpable one is unchanged
    },
  );

  test(title("a thread id is not a process: inspect(tid) is null and no snapshot lists it"), async () => {
    const tids = isLinux
      ? readdirSync(`/proc/${process.pid}/task`)
          .map(Number)
          .filter((t) => t !== process.pid)
      : [];
    if (tids.length === 0) {
      console.log(`[backends] ${row.name}: no thread ids to try on ${process.platform}`);
      expect(isLinux).toBe(false); // Node always runs libuv threads on Linux
      return;
    }
    expect(existsSync(`/proc/${tids[0]}/stat`)).toBe(true); // the premise: /proc answers for a tid
    for (const tid of tids.slice(0, 3)) expect(await facts.inspect(tid), `tid ${tid}`).toBeNull();
    const snap = await facts.snapshot();
    for (const tid of tids) expect(snap.processes.has(tid)).toBe(false);
    expect((await facts.inspect(process.pid))?.pid).toBe(process.pid);
  });

  helperTest(envexecHelper)(
    helperTitle(
      envexecHelper,
      "a verbatim environment: duplicate keys (first wins), empty entries, no '='; argv with spaces",
    ),
    async () => {
      const env = [
        "DUP=first",
        "",
        "DUP=second",
        "NOEQ",
        "=lead",
        "EMPTY=",
        "",
        `PATH=${process.env.PATH ?? ""}`,
        "LAST=a=b c",
      ];
      const args = ["-c", "read x", "two  spaces", " lead", "trail ", ""];
      const child = spawnTracked(envexecHelper.path!, [...env, "--", SH, ...args], {
        stdio: ["pipe", "ignore", "inherit"],
      });
      await waitExec(child.pid, SH);
      const keys = ["DUP", "EMPTY", "NOEQ", "LAST", "MISSING", "lead"];
      const d = await waitFor("the shell to block in read", async () => {
        const x = await facts.inspect(child.pid, { envKeys: keys });
        return x?.state === "S" ? x : null;
      });
      if (row.deep) {
        expect(d.argv).toEqual([SH, ...args]);
        expect(d.env).toEqual({ DUP: "first", EMPTY: "", NOEQ: null, LAST: "a=b c", MISSING: null, lead: null });
        expect(d.envReadable).toBe(true);
      } else {
        expect(d.argv).toBeNull();
        expect(d.env).toEqual(Object.fromEntries(keys.map((k) => [k, null])));
      }
    },
  );

  test(title("an unlinked executable keeps the kernel's ' (deleted)' suffix"), async () => {
    const exe = join(tmp, "deleted-sleep");
    await copyFile(existsSync("/bin/sleep") ? "/bin/sleep" : "/usr/bin/sleep", exe);
    await chmod(exe, 0o755);
    const child = spawnTracked(exe, ["30"]);
    await waitExec(child.pid, exe);
    unlinkSync(exe);
    const d = await facts.inspect(child.pid);
    expect(d?.pid).toBe(child.pid);
    expect(d!.exePath).toBe(row.deep ? `${exe} (deleted)` : null);
  });

  helperTest(deepexecHelper)(
    helperTitle(deepexecHelper, "an exe path longer than a page (ENAMETOOLONG) is exePath null, never a throw"),
    async () => {
      const deep = spawnDeepExe(deepexecHelper.path!);
      try {
        await waitExec(deep.child.pid, "./s");
        const d = await facts.inspect(deep.child.pid, { envKeys: ["PATH"] });
        expect(d).not.toBeNull();
        expect(d!.exePath).toBeNull();
        if (row.deep) {
          expect(d!.argv).toEqual(["./s", "300"]);
          expect(d!.envReadable).toBe(true);
        }
        expect((await facts.snapshot()).processes.get(deep.child.pid)?.pid).toBe(deep.child.pid);
      } finally {
        deep.child.kill("SIGKILL");
        await exited(deep.child);
        deep.cleanup();
      }
    },
  );

  test(title("processes exiting mid-snapshot never make it throw"), async () => {
    const churn = [0, 1].map(() => spawnGroup(SH, ["-c", "while :; do /bin/true; done"]));
    const sizes: number[] = [];
    for (let i = 0; i < 8; i++) {
      const snap = await facts.snapshot();
      expect(snap.processes.get(process.pid)?.pid).toBe(process.pid);
      for (const c of churn) expect(snap.processes.has(c.pid)).toBe(true);
      sizes.push(snap.processes.size);
    }
    expect(churn.every(isRunning)).toBe(true);
    expect(sizes.every((n) => n > 2)).toBe(true);
  });

  test(title("a setsid child leads its own session and group"), async () => {
    const child = spawnGroup("sleep", ["30"]); // detached: setsid() before exec
    await waitExec(child.pid, "sleep");
    const snap = await facts.snapshot();
    const p = snap.processes.get(child.pid)!;
    expect(p.pgid).toBe(child.pid);
    if (row.name !== "ps" || process.platform !== "darwin") expect(p.sid).toBe(child.pid);
    expect(p.ppid).toBe(process.pid);
    expect(snap.groupMembers(child.pid).map((m) => m.pid)).toEqual([child.pid]);
    const d = await facts.inspect(child.pid);
    expect(d).toMatchObject({ pgid: child.pid, ppid: process.pid });
  });

  test(title("start time is stable for a pid and differs for a newer process"), async () => {
    const a = spawnTracked("sleep", ["30"]);
    await waitExec(a.pid, "sleep");
    const s1 = (await facts.snapshot()).processes.get(a.pid)!.startTime;
    const s2 = (await facts.snapshot()).processes.get(a.pid)!.startTime;
    expect(s2).toBe(s1);
    expect((await facts.inspect(a.pid))!.startTime).toBe(s1);
    // ps lstart has one-second resolution: start the second process in a later second
    await new Promise((r) => setTimeout(r, row.name === "ps" ? 1100 : 50));
    const b = spawnTracked("sleep", ["30"]);
    await waitExec(b.pid, "sleep");
    const sb = (await facts.snapshot()).processes.get(b.pid)!.startTime;
    expect(sb).not.toBe(s1);
    expect(BigInt(sb) > BigInt(s1)).toBe(true);
  });

  test(title("bad input is a TypeError/RangeError naming pid, checked before any lookup"), async () => {
    for (const bad of [0, -1, Number.NaN, 1.5, MAX_PID + 1, "5"] as unknown[]) {
      const err = await facts.inspect(bad as number).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, `inspect(${String(bad)})`).toBeInstanceOf(Error);
      expect([TypeError, RangeError].some((C) => err instanceof C)).toBe(true);
      expect((err as Error).message).toMatch(/pid/);
    }
    await expect(facts.inspect(process.pid, { envKeys: ["A=B"] })).rejects.toThrow(TypeError);
    await expect(facts.inspect(process.pid, { envKeys: "PATH" as unknown as string[] })).rejects.toThrow(TypeError);
  });

  test(title("a vanished pid is null, and absent from the next snapshot"), async () => {
    const c = spawnTracked("true", []);
    await exited(c);
    expect(await facts.inspect(c.pid)).toBeNull();
    expect((await facts.snapshot()).processes.has(c.pid)).toBe(false);
  });
});

/** kthreadd's stat, when this pid namespace shows it (a container's private namespace does not). */
function readStat2(): string | null {
  try {
    const text = readFileSync("/proc/2/stat", "utf8");
    return text.includes("(kthreadd)") ? text : null;
  } catch {
    return null;
  }
}

describe("facts backend none", () => {
  const variants: Array<[string, () => ProcessFacts]> = [
    ["createNoneFacts()", () => createNoneFacts()],
    ['getProcessFacts({ backend: "none" })', () => getProcessFacts({ backend: "none" })],
  ];
  it.each(variants)("%s answers every question with FactsUnavailableError", async (_n, make) => {
    const facts = make();
    expect(facts.backend).toBe("none");
    expect(facts.identityStrength).toBe("none");
    await expect(facts.snapshot()).rejects.toBeInstanceOf(FactsUnavailableError);
    // even for this very process, which certainly exists: "unknown", not a fact
    await expect(facts.inspect(process.pid)).rejects.toBeInstanceOf(FactsUnavailableError);
    await expect(facts.inspect(1, { envKeys: ["PATH"] })).rejects.toBeInstanceOf(FactsUnavailableError);
    const err = await facts.snapshot().catch((e: unknown) => e);
    expect((err as Error).name).toBe("FactsUnavailableError");
    expect((err as Error).message).toMatch(/none/);
  });

  it("still validates input first", async () => {
    const facts = createNoneFacts();
    await expect(facts.inspect(0)).rejects.toThrow(RangeError);
    await expect(facts.inspect(Number.NaN)).rejects.toThrow(/pid/);
    await expect(facts.inspect(1, { envKeys: [""] })).rejects.toThrow(TypeError);
  });
});
